"""Recovery in seconds (issue 48): the same fault under kill-and-requeue and under
replace-from-spare, on the embedded cluster with real processes and real PyTorch ranks.

    python bench/recovery.py [--runs 5] [--faults xid kill] [--steps 200]

Each run starts a fresh daemon (4 declared GPUs, the health agent following its own
kernel log) and submits examples/train.py as 2 replicas (`--elastic=2:2
--gpus-per-task=1 --auto-resume=5 --requeue-exit=137`, checkpoints every 20 steps, 50 ms
of "compute" a step, gloo on the CPU; with --cuda every rank trains on the machine's
real GPU 0, shared, still over gloo, as a single-GPU machine allows: run it as a user
other than root, whose daemon hides declared GPUs rather than denying real ones). At
step 25 (and, under `spare`, once the standby says it is ready: a fault comes hours
into a run) it injects the fault into rank 1:

  xid   an Xid 79 for rank 1's GPU in the kernel log (the health agent fences it)
  kill  SIGKILL to rank 1's process (`podium inject kill JOB --rank 1`)

  requeue  today's default: the job stops whole (NODE_FAIL or FAILED), is requeued by
           auto-resume and restarts every replica from its last checkpoint
  spare    `--spares=1`: the failed replica is replaced on the spare's GPU while rank 0
           runs on; the spare's warm standby (torch imported, model built, device
           context made) takes rank 1 and its state from rank 0 (examples/peer_heal.py)
  cold     the same without a standby (train.py --cold-spare): the replacement starts
           from nothing on the spare's GPU

With `--stack torchrun` the job is instead examples/torchrun_ddp.py (PyTorch's own
torchrun tutorial script, unchanged) under `torchrun --nnodes=2 --max-restarts=3`,
rendezvous at Podium's MASTER_ADDR:MASTER_PORT, snapshots every epoch of 4 batches, 50 ms
a batch; the fault comes at its 25th batch, and "next step" is the first batch logged
from a restart (TorchElastic's, or the requeued run's). Its policies:

  requeue      no spares: the job stops whole (NODE_FAIL) and is requeued
  spare        `--spares=1`: a new agent on the spare's GPU, taken in by TorchElastic's
               rendezvous once the dead node's keep-alive expired (Podium's default
               for a job that gives no --rdzv-conf: 1 s x 2)
  spare-5x3    the same with TorchElastic's own default keep-alive, 5 s x 3
               (`--rdzv-conf keep_alive_interval=5,keep_alive_max_attempt=3`)

(`kill` under `requeue` is not run: without a spare the survivor's agent waits for a
second node until its join timeout, 600 s, as TorchElastic does.)

With `--stack torchft` the job is examples/torchft_ddp.py (torchft's train_ddp.py on
synthetic data) as two replica groups (`--torchft`: one `torchrun` per group, Podium's
lighthouse), a checkpoint every 20 steps, 50 ms a step; the fault hits group 1 at step
60. "Next step" is the first step committed after the fault, and "full size" the first
with both groups in the quorum again. Its policies:

  requeue  no spares: the job stops whole (NODE_FAIL), is requeued and both groups
           resume from the checkpoint
  spare    `--spares=1`: group 1 alone is restarted on the spare's GPU; group 0 keeps
           its process and steps on alone, then heals the newcomer live

(`kill` under `requeue` is not run: the job runs on as one group, as torchft means it
to, and there is no requeue to compare.)

Per run: fault -> next training step (the first step logged after the fault, by the
progress file's clock), steps trained twice (the highest step before the fault less
the step training went on from), and whether rank 0 kept its process. The policies
and faults are interleaved run by run. Prints min/median/max and writes
bench/results/recovery-<time>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.stack_runs import inject, torchft_run, torchrun_run, wait_for
from podium.api.states import TERMINAL_STATES
from podium.backends.embedded.client import EmbeddedBackend
from podium.cli.daemon_cmds import start_daemon, stop_daemon
from podium.cli.fault_demo import read_progress
from podium.cli.submit import build_request

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """\
node:
  name: node0
  cpus: 8
  memory_mb: 16000
  gpus: {{source: declared, count: 4, type: h100, memory_mb: 81920}}
kill_wait_s: 5
scheduler_interval_s: 0.2
health:
  kernel_log: {kernel_log}
  deep_interval_s: 86400
"""


def one_run(
    policy: str, fault: str, steps: int, timeout: float, cuda: bool, stack: str = "train"
) -> dict[str, Any]:
    """One job, one fault at step 25 on rank 1; the figures of its recovery."""
    home = Path(tempfile.mkdtemp(prefix="podium-recovery-"))
    home.chmod(0o755)
    work = home / "work"
    work.mkdir()
    kernel_log = home / "kern.log"
    kernel_log.touch()
    (home / "cluster.yaml").write_text(CONFIG.format(kernel_log=kernel_log))
    progress = work / "p.jsonl"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    start_daemon(home)
    client = EmbeddedBackend(home)
    deadline = time.monotonic() + timeout
    try:
        options = ["--elastic=2:2", "--gpus-per-task=1", "--auto-resume=5", "-o", "train.out",
                   "--requeue-exit=137"]  # a rank killed (128 + 9) is a fault: requeue  # fmt: skip
        if policy != "requeue":
            options.append("--spares=1")
        if stack in ("torchrun", "torchft"):
            run = torchrun_run if stack == "torchrun" else torchft_run
            return run(client, home, work, options, env, policy, fault, deadline)
        command = (f"exec {sys.executable} {ROOT / 'examples' / 'train.py'} --model gpt "
                   f"--steps {steps} --checkpoint-every 20 --step-time 0.05 "
                   f"--report-every 0 --progress {progress}")  # fmt: skip
        if policy == "cold":
            command += " --cold-spare"
        if cuda:  # the machine's one real GPU, shared by every rank (gloo), see --cuda
            command = f"export CUDA_VISIBLE_DEVICES=0; {command} --backend gloo"
        request, _ = build_request([*options, "--wrap", command])
        request["cwd"], request["environment"] = str(work), env
        job_id = client.submit(request)[0]["job_id"]

        def reached() -> int:
            return max((e["step"] for e in read_progress(progress) if e["event"] == "step"),
                       default=0)  # fmt: skip

        wait_for("step 25", lambda: reached() >= 25, deadline)
        if policy == "spare":  # a fault comes hours into a run: the standby is ready by then
            out = work / "train.out"
            wait_for("the warm standby", lambda: "warm standby ready" in out.read_text(), deadline)
        pids = json.loads((home / "jobs" / str(job_id) / "tasks.json").read_text())
        before = reached()
        fault_at = inject(client, home, job_id, fault)

        went_on, first = wait_for("the next step", lambda: recovered(progress, fault_at), deadline)
        events = read_progress(progress)
        job_dir = home / "jobs" / str(job_id)
        after = json.loads((job_dir / "tasks.json").read_text()) if job_dir.exists() else {}
        done = wait_for("the end", lambda: (j := client.job(job_id))["state"] in
                        TERMINAL_STATES and j, deadline)  # fmt: skip
        return {
            "policy": policy,
            "fault": fault,
            "fault_to_step_s": round(first["t"] - fault_at, 3),
            "steps_redone": steps_redone(events, before, went_on),
            "rank0_kept": bool(after) and after.get("0") == pids.get("0"),
            "restarts": done["restart_count"],
            "state": done["state"],
            "devices": sorted(set(re.findall(r"device=(\S+)", (work / "train.out").read_text()))),
        }
    finally:
        client.close()
        stop_daemon(home)
        shutil.rmtree(home, ignore_errors=True)


def recovered(progress: Path, fault_at: float) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The event training went on from after `fault_at` (a heal, or a restart's resume)
    and the first step after it; None until both are logged."""
    events = read_progress(progress)
    back = next((e for e in events if e["t"] > fault_at and e["event"] in
                 ("heal", "resume", "begin")), None)  # fmt: skip
    if back is None:
        return None
    step = next((e for e in events if e["t"] > back["t"] and e["event"] == "step"), None)
    return None if step is None else (back, step)


def steps_redone(events: list[dict[str, Any]], before: int, went_on: dict[str, Any]) -> int:
    """Steps trained twice: the highest step logged before training went on (`before`:
    at the fault; a step may still be logged after it) less the step it went on from."""
    last_before = max(
        (e["step"] for e in events if e["event"] == "step" and e["t"] < went_on["t"]), default=0
    )
    return max(0, max(before, last_before) - int(went_on["step"]))


def report(results: list[dict[str, Any]], args: argparse.Namespace, name: str) -> None:
    """Print min/median/max per fault and policy; write bench/results/NAME-<time>.json."""
    print("\nfault  policy   fault->next step s (min/median/max)  steps redone  rank 0 kept  runs")
    for fault in args.faults:
        for policy in args.policies:
            mine = [r for r in results if r["fault"] == fault and r["policy"] == policy]
            if not mine:
                continue
            failed = [r for r in mine if r["fault_to_step_s"] is None]
            mine = [r for r in mine if r["fault_to_step_s"] is not None]
            if failed:
                print(f"{fault:6} {policy:8} {len(failed)} run(s) did not recover: "
                      f"{failed[0]['error']}")  # fmt: skip
            if not mine:
                continue
            seconds = summary([r["fault_to_step_s"] for r in mine])
            redone = summary([float(r["steps_redone"]) for r in mine])
            kept = sum(r["rank0_kept"] for r in mine)
            print(f"{fault:6} {policy:8} {seconds:>36}  {redone:>12}  {kept}/{len(mine):<9}  "
                  f"{len(mine)}")  # fmt: skip
            if all("fault_to_full_s" in r for r in mine):  # torchft: both groups stepping again
                full = summary([r["fault_to_full_s"] for r in mine])
                print(f"{'':6} {'':8} {'fault->full size s: ' + full:>36}")
    out = ROOT / "bench" / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": results, "args": vars(args)}, indent=1))
    print(f"\nwritten: {out}")


def summary(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--faults", nargs="+", default=["xid", "kill"], choices=["xid", "kill"])
    parser.add_argument("--policies", nargs="+", default=None,
                        choices=["requeue", "cold", "spare", "spare-5x3"],
                        help="train: requeue cold spare (the default); "
                        "torchrun: requeue spare spare-5x3; torchft: requeue spare")  # fmt: skip
    parser.add_argument("--stack", choices=["train", "torchrun", "torchft"], default="train",
                        help="train.py (Podium's contract), torchrun or torchft")  # fmt: skip
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument(
        "--cuda", action="store_true",
        help="ranks train on the machine's real GPU 0 (shared, gloo): each start and "
        "replacement pays torch's CUDA start-up; the cluster's GPUs stay declared",
    )  # fmt: skip
    args = parser.parse_args()
    if args.policies is None:
        args.policies = {"train": ["requeue", "cold", "spare"], "torchft": ["requeue", "spare"],
                         "torchrun": ["requeue", "spare", "spare-5x3"]}[args.stack]  # fmt: skip
    results = []
    for i in range(args.runs):
        for fault in args.faults:
            for policy in args.policies:
                if args.stack != "train" and (policy, fault) == ("requeue", "kill"):
                    continue  # nothing to compare: see the docstring
                result = one_run(policy, fault, args.steps, args.timeout, args.cuda, args.stack)
                results.append(result)
                print(f"run {i + 1} {fault:4} {policy:7}: {json.dumps(result)}", flush=True)
    report(results, args, "recovery" if args.stack == "train" else f"recovery-{args.stack}")


if __name__ == "__main__":
    main()
