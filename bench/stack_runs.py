"""bench/recovery.py's runs for the stacks people train with, unchanged: torchrun
(TorchElastic: examples/torchrun_ddp.py) and torchft (examples/torchft_ddp.py). Each
takes a daemon bench/recovery.py started and one fault; see its docstring for the
policies and what is measured."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from podium.api.states import TERMINAL_STATES
from podium.backends.embedded.client import EmbeddedBackend
from podium.cli.inject import xid_line
from podium.cli.submit import build_request

ROOT = Path(__file__).resolve().parents[1]
FT_STEPS = 400  # the torchft job's length; the fault comes at its step 60


def inject(client: EmbeddedBackend, home: Path, job_id: int, fault: str, rank: int = 1) -> float:
    """The fault on `rank`'s replica of `job_id`: an Xid 79 for its GPU in the kernel log
    the health agent follows, or SIGKILL to its process. When it was given (time.time())."""
    job = client.job(job_id)
    at = time.time()
    if fault == "xid":
        bus = {g["index"]: g["bus_id"] for g in client.nodes()[0]["gpus"]}
        with open(home / "kern.log", "a") as fh:
            fh.write(
                xid_line(bus[job["gpu_ids"][rank]], 79, time.clock_gettime(time.CLOCK_BOOTTIME))
            )
    else:
        client.inject({"kind": "kill", "job_id": job_id, "rank": rank})
    return at


def not_recovered(client: EmbeddedBackend, work: Path, job_id: int, row: dict[str, Any],
                  late: Exception) -> dict[str, Any]:  # fmt: skip
    """A run that did not recover is a result too: why, from the job's events and output."""
    out = work / "train.out"
    told = [f"{e['kind']}: {e['detail']}" for e in client.job(job_id)["events"]]
    tail = out.read_text()[-1500:] if out.exists() else ""
    return {**row, "fault_to_step_s": None, "error": str(late), "events": told, "output": tail}


def wait_for(what: str, test: Any, deadline: float) -> Any:
    while True:
        value = test()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.05)


def torchrun_command(policy: str, work: Path, epochs: int) -> str:
    """The torchrun job's script line: PyTorch's tutorial script, unchanged."""
    conf = (
        "--rdzv-conf=keep_alive_interval=5,keep_alive_max_attempt=3 "
        if policy == "spare-5x3"
        else ""
    )
    return (f"exec torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 "
            f"--rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT "
            f"--rdzv-id=$SLURM_JOB_ID {conf}"
            f"{ROOT / 'examples' / 'torchrun_ddp.py'} {epochs} 1 "
            f"--snapshot-path {work / 'snapshot.pt'} --progress {work / 'p.jsonl'} "
            "--step-time 0.05")  # fmt: skip


def batches(progress: Path) -> list[dict[str, Any]]:
    """examples/torchrun_ddp.py's progress lines, each with its place (epoch, batch)."""
    if not progress.exists():
        return []
    lines = [json.loads(x) for x in progress.read_text().splitlines() if x.strip()]
    return [{**e, "at": e["epoch"] * 4 + e["batch"]} for e in lines]


def restarted(progress: Path, fault_at: float) -> dict[str, Any] | None:
    """The first batch logged after `fault_at` by another process than the one that
    logged before it: a worker TorchElastic restarted, or the requeued run's."""
    lines = batches(progress)
    before = [e for e in lines if e["t"] <= fault_at]
    if not before:
        return None
    return next((e for e in lines[len(before) :] if e["pid"] != before[-1]["pid"]), None)


def torchrun_run(
    client: EmbeddedBackend, home: Path, work: Path, options: list[str],
    env: dict[str, str], policy: str, fault: str, deadline: float,
) -> dict[str, Any]:  # fmt: skip
    """one_run's torchrun job: the same fault at its 25th batch."""
    progress = work / "p.jsonl"
    request, _ = build_request([*options, "--wrap", torchrun_command(policy, work, 40)])
    request["cwd"], request["environment"] = str(work), env
    job_id = client.submit(request)[0]["job_id"]
    wait_for("batch 25", lambda: len(batches(progress)) >= 25, deadline)
    fault_at = inject(client, home, job_id, fault)
    try:
        first = wait_for("the next step", lambda: restarted(progress, fault_at), deadline)
        done = wait_for("the end", lambda: (j := client.job(job_id))["state"] in
                        TERMINAL_STATES and j, deadline)  # fmt: skip
    except TimeoutError as late:
        row = {"policy": policy, "fault": fault, "stack": "torchrun"}
        return not_recovered(client, work, job_id, row, late)
    lines = batches(progress)
    last_before = max(e["at"] for e in lines if e["t"] < first["t"])
    return {
        "policy": policy,
        "fault": fault,
        "stack": "torchrun",
        "fault_to_step_s": round(first["t"] - fault_at, 3),
        "steps_redone": max(0, last_before - first["at"] + 1),
        "rank0_kept": False,  # TorchElastic restarts every worker
        "restarts": done["restart_count"],
        "state": done["state"],
        "replacements": len(client.job(job_id).get("replacements") or []),
    }


def torchft_command(work: Path) -> str:
    """One replica group's script line, as torchft's torchx component runs a group: one
    torchrun of one node, on the group's own store (Podium's MASTER_PORT per group)."""
    return ("exec torchrun --nnodes=1 --nproc-per-node=1 "
            "--master-addr=$MASTER_ADDR --master-port=$MASTER_PORT "
            f"{ROOT / 'examples' / 'torchft_ddp.py'} --steps {FT_STEPS} "
            f"--checkpoint {work / 'ckpt.pt'} --save-every 20 "
            f"--progress {work / 'p.jsonl'} --step-time 0.05")  # fmt: skip


def ft_steps(progress: Path) -> list[dict[str, Any]]:
    """examples/torchft_ddp.py's progress lines: one per committed step per group."""
    if not progress.exists():
        return []
    return [json.loads(x) for x in progress.read_text().splitlines() if x.strip()]


def torchft_run(
    client: EmbeddedBackend, home: Path, work: Path, options: list[str],
    env: dict[str, str], policy: str, fault: str, deadline: float,
) -> dict[str, Any]:  # fmt: skip
    """one_run's torchft job (two replica groups, `--torchft`): the fault on group 1 at
    step 60. "Next step": the first step committed after the fault without the lost
    group's process (group 0 alone, or a restarted run's); "full size": the first
    step after it with two groups in the quorum again. A survivor that torchft 0.2.0
    crashed (docs/resiliency.md, "torchft") is counted in `torchft_asserts`."""
    progress = work / "p.jsonl"
    request, _ = build_request([*options, "--torchft", "--wrap", torchft_command(work)])
    request["cwd"], request["environment"] = str(work), env
    job_id = client.submit(request)[0]["job_id"]
    wait_for("step 60", lambda: any(e["step"] >= 60 for e in ft_steps(progress)), deadline)
    before = ft_steps(progress)
    old = {e["pid"] for e in before}
    pid0 = [e["pid"] for e in before if e["group"] == 0][-1]
    fault_at = inject(client, home, job_id, fault)
    row = {"policy": policy, "fault": fault, "stack": "torchft"}

    def after() -> list[dict[str, Any]]:
        return [e for e in ft_steps(progress) if e["t"] > fault_at]

    def without_lost() -> dict[str, Any] | None:
        return next((e for e in after() if e["participants"] == 1 or e["pid"] not in old), None)

    try:
        first = wait_for("the next step", without_lost, deadline)
        full = wait_for("both groups again", lambda: next(
            (e for e in after() if e["participants"] == 2 and e["t"] > first["t"]), None),
            deadline)  # fmt: skip
        done = wait_for("the end", lambda: (j := client.job(job_id))["state"] in
                        TERMINAL_STATES and j, deadline)  # fmt: skip
    except TimeoutError as late:
        return not_recovered(client, work, job_id, row, late)
    lines = ft_steps(progress)
    last_before = max(e["step"] for e in lines if e["t"] < first["t"])
    told = client.job(job_id).get("replacements") or []
    out = work / "train.out"
    return {
        **row,
        "fault_to_step_s": round(first["t"] - fault_at, 3),
        "fault_to_full_s": round(full["t"] - fault_at, 3),
        "steps_redone": max(0, last_before - first["step"] + 1),
        "rank0_kept": all(e["pid"] == pid0 for e in lines if e["group"] == 0),
        "restarts": done["restart_count"],
        "state": done["state"],
        "replacements": [r["reason"] for r in told],
        "torchft_asserts": out.read_text().count("assert fut._fut") if out.exists() else 0,
    }


__all__ = ["inject", "torchft_run", "torchrun_run", "wait_for"]
