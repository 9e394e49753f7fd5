"""Replace, don't restart, on a real Slurm cluster of four hosts (a network, UTS and
mount namespace per node): a 2-replica job with one spare node (`--spares=1`,
examples/train.py over gloo) loses rank 1 to an Xid on its node, a SIGKILL of its
process, or its whole host (`node.sh kill`), and goes on with rank 0's process
untouched, rank 1 taken by the warm standby on the spare node, no step trained twice,
and Slurm's view true (the node DOWN or drained with the reason; the job COMPLETED).
A job that does not take part in the contract ends as it would without spares."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from podium.backends.slurm.hook import node_state_dir, state_dir
from podium.backends.slurm.keeper_parts import job_dir
from podium.cli.fault_demo import read_progress
from podium.cli.inject import xid_line
from podium.config.cluster import load_config
from podium.node.inventory import declared_bus_id
from podium.run.rank_beats import RANKS_DIR, read_ranks
from tests.integration.slurm_cluster import PODIUM, ROOT, TERMINAL, SlurmCluster, in_service
from tests.polling import poll, wait_until

# One worker runs the "slurm-hosts-2" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-hosts-2")]


@pytest.fixture(scope="module")
def slurm(slurm_hosts: SlurmCluster) -> SlurmCluster:
    return in_service(slurm_hosts)


def _namespace(slurm: SlurmCluster, node: str) -> str:
    env = (slurm.directory / "etc" / "testbed.env").read_text()
    tb_id = next(line.split("=", 1)[1] for line in env.splitlines() if line.startswith("TB_ID="))
    return f"pdm{tb_id.strip()}-{int(node.rsplit('-', 1)[1])}"


def _rank_pid(slurm: SlurmCluster, node: str) -> int | None:
    """The training process on `node` (found in its host's network namespace)."""
    pids = subprocess.run(
        ["ip", "netns", "pids", _namespace(slurm, node)], capture_output=True, text=True
    ).stdout.split()
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"train.py") for a in argv) and not argv[0].endswith(b"bash"):
            return int(pid)
    return None


def _where_env(slurm: SlurmCluster, job_id: int) -> dict[str, str]:
    """What the keeper of root's job `job_id` finds its directory by."""
    state = str(state_dir(load_config(slurm.config)))
    return {"PODIUM_STATE_DIR": state, "SLURM_JOB_USER": "root", "SLURM_JOB_ID": str(job_id)}


def _where(slurm: SlurmCluster, job_id: int, log: Path, progress: Path) -> str:
    """A job that did not end: its log's tail, rank 0's last records, the ranks' beats
    and the job's steps, for the failure's message."""
    # rank -> (step, written at, seconds)
    beats = read_ranks(job_dir(_where_env(slurm, job_id)) / RANKS_DIR)
    steps = subprocess.run(["squeue", "-h", "-s", "-j", str(job_id), "-o", "%i|%N|%M"],
                           capture_output=True, text=True, env=slurm.env).stdout  # fmt: skip
    return (f"log:\n{log.read_text()[-3000:] if log.exists() else '(none)'}\n"
            f"progress:\n{''.join(progress.read_text().splitlines(True)[-5:])}\n"
            f"beats at {time.time():.1f}: {beats}\nsteps:\n{steps}")  # fmt: skip


def _steps(path: Path) -> list[int]:
    return [int(e["step"]) for e in read_progress(path) if e["event"] == "step"]


@pytest.mark.parametrize("fault", ["xid", "kill", "host"])
def test_a_lost_replica_is_replaced_from_the_spare_node(
    slurm: SlurmCluster, tmp_path: Path, fault: str
) -> None:
    pytest.importorskip("torch")
    tmp_path.chmod(0o755)
    progress = tmp_path / "progress.jsonl"
    train = (f"exec {sys.executable} {ROOT / 'examples' / 'train.py'} --model gpt --steps 200 "
             f"--checkpoint-every 20 --step-time 0.05 --progress {progress}")  # fmt: skip
    job_id = int(slurm.podium(
        "submit", "--parsable", "-N", "2", "--ntasks-per-node=1", "--spares=1",
        "--auto-resume=2", "-o", str(tmp_path / "%j.out"),
        f"--checkpoint-dir={tmp_path / 'ckpt'}", "--wrap", train, cwd=tmp_path,
    ).stdout.strip())  # fmt: skip
    log = tmp_path / f"{job_id}.out"
    wait_until(lambda: log.exists() and "warm standby ready" in log.read_text(),
               "the spare's warm standby", 120)  # fmt: skip
    wait_until(lambda: max(_steps(progress), default=0) >= 40, "step 40", 120)
    job = slurm.json("show", str(job_id))
    assert len(job["nodes"]) == 3  # two replicas and the spare, in one allocation
    first, victim, spare = job["nodes"]
    rank0 = _rank_pid(slurm, first)
    assert rank0 is not None
    if fault == "xid":  # the job's user leaves a FIFO where the root hook writes (issue 60)
        os.mkfifo(job_dir(_where_env(slurm, job_id)) / f"fault-{victim}.json")
    fault_at = time.time()
    if fault == "xid":
        home = str(node_state_dir(load_config(slurm.config), victim))
        with open(slurm.directory / "nodes" / victim / "kern.log", "a") as fh:
            fh.write(
                xid_line(declared_bus_id(0, home), 79, time.clock_gettime(time.CLOCK_BOOTTIME))
            )
    elif fault == "kill":
        victim_pid = _rank_pid(slurm, victim)
        assert victim_pid is not None
        os.kill(victim_pid, 9)
    else:
        slurm.node_sh(victim, "kill")
    try:
        heal = poll(lambda: next((e for e in read_progress(progress)
                                  if e["event"] == "heal"), None),
                    lambda e: e is not None, "the heal", 60)  # fmt: skip
        assert heal is not None and heal["replaced"] == [1] and heal["generation"] == 1, heal
        after = poll(lambda: [e for e in read_progress(progress)
                              if e["event"] == "step" and e["t"] > heal["t"]],
                     bool, "a step after the heal", 30)  # fmt: skip
        # An Xid waits for the node's next health run (every 10 s in the test clusters)
        bound = 20 if fault == "xid" else 10
        took = after[0]["t"] - fault_at
        assert took <= bound, f"fault -> next step {took}"
        assert _rank_pid(slurm, first) == rank0  # the survivor kept its process
        try:
            final = slurm.wait_job(job_id, set(TERMINAL), 180)
        except AssertionError as exc:  # where it stood: the log, rank 0's record, the beats
            raise AssertionError(f"{exc}\n{_where(slurm, job_id, log, progress)}") from None
        assert final["state"] == "COMPLETED", log.read_text()[-3000:]
        assert final["restart_count"] == 0
        steps = _steps(progress)
        assert len(steps) == len(set(steps)) and max(steps) == 200, "a step trained twice"
        told = final["replacements"]
        assert len(told) == 1 and told[0]["node_from"] == victim and told[0]["node_to"] == spare
        assert told[0]["warm"] is True
        if fault == "xid":
            assert "xid" in told[0]["reason"].lower()
            drained = slurm.node(victim)
            assert "drain" in drained["state"] and drained["reason"].startswith("podium:")
        if fault == "host":  # Slurm's own view: the host not responding, set DOWN
            slurm.wait_node(victim, lambda n: "down" in n["state"], 90)
    finally:
        slurm.podium("cancel", str(job_id), check=False)
        if fault == "host":
            slurm.node_sh(victim, "join")
            slurm.node_sh(victim, "start")
        subprocess.run(["scontrol", "update", f"NodeName={victim}", "State=RESUME"],
                       capture_output=True, env=slurm.env)  # fmt: skip
        slurm.wait_node(victim, lambda n: n["state"] in ("idle", "mixed", "allocated"), 90)


def test_a_job_outside_the_contract_ends_as_without_spares(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """Spare nodes, but a job that never writes `ready`: a replica killed ends the job
    FAILED, as a failed step does without spares; no rank starts on the spare."""
    tmp_path.chmod(0o755)
    script = tmp_path / "sleepy.sh"
    script.write_text(f"#!/bin/bash\necho \"rank $RANK on $(hostname)\"\nexec {sys.executable} "
                      "-c 'import time; time.sleep(120)'\n")  # fmt: skip
    job_id = int(slurm.podium(
        "submit", "--parsable", "-N", "2", "--ntasks-per-node=1", "--spares=1",
        "-o", str(tmp_path / "%j.out"), str(script), cwd=tmp_path,
    ).stdout.strip())  # fmt: skip
    job = slurm.wait_job(job_id, {"RUNNING"}, 60)
    victim = job["nodes"][1]

    def sleeper() -> int | None:
        pids = subprocess.run(["ip", "netns", "pids", _namespace(slurm, victim)],
                              capture_output=True, text=True).stdout.split()  # fmt: skip
        for pid in pids:
            try:
                if b"time.sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
            except OSError:
                continue
        return None

    pid = poll(sleeper, lambda p: p is not None, "rank 1's process", 60)
    assert pid is not None
    os.kill(pid, 9)
    final = slurm.wait_job(job_id, set(TERMINAL), 60)
    assert final["state"] == "FAILED" and final["restart_count"] == 0, final
    assert final["replacements"] == []
    out = (tmp_path / f"{job_id}.out").read_text()
    assert "rank 0 on" in out and "rank 1 on" in out and "no spare node takes its place" in out
    assert "rank 1 on " + job["nodes"][2] not in out


def test_a_torchft_group_lost_is_restarted_on_the_spare_node_and_healed_live(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """torchft on Slurm (--torchft with a spare node): each replica node is a replica
    group under the keeper, which runs the lighthouse; group 1's torchrun killed, its
    group starts again on the spare node and heals from group 0, which keeps its
    process and steps on. torchft 0.2.0's own survivor crash (docs/resiliency.md,
    "torchft") is let through only with its assertion in the output."""
    pytest.importorskip("torchft")
    tmp_path.chmod(0o755)
    progress = tmp_path / "p.jsonl"
    job_id = _submit_from_venv(slurm, tmp_path, "--torchft", script=(
        "exec torchrun --nnodes=1 --nproc-per-node=1 \\\n"
        "    --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT \\\n"
        f"    {ROOT / 'examples' / 'torchft_ddp.py'} --steps 300 --progress {progress} \\\n"
        f"    --step-time 0.05 --checkpoint {tmp_path / 'ckpt.pt'} --save-every 20\n"
    ))  # fmt: skip
    log = tmp_path / f"{job_id}.out"

    def steps() -> list[dict[str, Any]]:
        return _json_lines(progress)

    try:
        poll(steps, lambda p: {e["group"] for e in p if e["participants"] == 2} == {0, 1}
             and len(p) >= 40, "both groups training together", 120)  # fmt: skip
        victim = slurm.json("show", str(job_id))["nodes"][1]
        agent = poll(lambda: _process(slurm, victim, b"torchrun"), bool, "group 1's torchrun", 30)
        old = {e["pid"] for e in steps()}
        os.kill(agent, 9)
        poll(steps, lambda p: any(e["group"] == 1 and e["participants"] == 2
                                  and e["pid"] not in old for e in p),
             "group 1 back, healed", 90)  # fmt: skip
        final = slurm.wait_job(job_id, set(TERMINAL), 180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log.read_text()[-3000:] if log.exists() else ''}") from None
    finally:
        slurm.podium("cancel", str(job_id), check=False)
    assert final["state"] == "COMPLETED" and final["restart_count"] == 0, log.read_text()[-3000:]
    told = final["replacements"]
    assert told[0]["replaced"] == [1] and told[0]["node_from"] == victim, told
    crashed = told[1:]  # a survivor torchft crashed, replaced in its turn
    assert all(r["reason"].endswith("ended (1)") for r in crashed), told
    assert log.read_text().count("assert fut._fut") >= len(crashed), told  # torchft's own
    events = steps()
    if not crashed:  # group 0 kept its process; the newcomer joined at its peer's step
        assert len({e["pid"] for e in events if e["group"] == 0}) == 1
        first = next(e for e in events if e["group"] == 1 and e["pid"] not in old)
        peer = max(e["step"] for e in events if e["group"] == 0 and e["t"] < first["t"])
        assert first["step"] >= peer, (first, peer)  # healed, not from the checkpoint
    for pid in {e["pid"] for e in events}:  # no step trained twice by one process
        mine = [e["step"] for e in events if e["pid"] == pid]
        assert mine == sorted(set(mine)), (pid, mine)
    assert max(e["step"] for e in events) == 300


def _submit_from_venv(slurm: SlurmCluster, tmp_path: Path, *options: str, script: str) -> int:
    """`script` (bash) on 2 nodes and a spare node, submitted from the test's venv as
    its user would (sbatch exports the environment): the keeper finds the stack's
    servers (torchft_lighthouse, torch), and the steps torchrun, on that PATH."""
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n" + script)
    venv = {**slurm.env, "PATH": f"{Path(sys.executable).parent}:{slurm.env['PATH']}"}
    return int(subprocess.run(
        [PODIUM, "submit", "--parsable", "-N", "2", "--ntasks-per-node=1", "--spares=1",
         *options, "-o", str(tmp_path / "%j.out"), str(path)],
        capture_output=True, text=True, env=venv, cwd=tmp_path, check=True,
    ).stdout.strip())  # fmt: skip


def _json_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text() if path.exists() else ""
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _process(slurm: SlurmCluster, node: str, name: bytes) -> int | None:
    """A process on `node` (in its host's network namespace) whose argv names `name`."""
    pids = subprocess.run(["ip", "netns", "pids", _namespace(slurm, node)],
                          capture_output=True, text=True).stdout.split()  # fmt: skip
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(name) for a in argv[:2]):
            return int(pid)
    return None


def test_a_torchrun_node_lost_is_replaced_from_the_spare_node_without_a_requeue(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """torchrun on Slurm with a spare node: each replica node a TorchElastic node, the
    keeper hosting the rendezvous store on the batch node; rank 1's agent killed, a new
    agent on the spare node joins TorchElastic's next round and the workers restart
    from their snapshot: no requeue, the job COMPLETED at its full size."""
    pytest.importorskip("torch")
    tmp_path.chmod(0o755)
    progress = tmp_path / "p.jsonl"
    job_id = _submit_from_venv(slurm, tmp_path, "--auto-resume=1", script=(
        "exec torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 \\\n"
        "    --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\\n"
        "    --rdzv-id=$SLURM_JOB_ID \\\n"
        f"    {ROOT / 'examples' / 'torchrun_ddp.py'} 40 1 --snapshot-path {tmp_path}/s.pt \\\n"
        f"    --progress {progress} --step-time 0.05\n"
    ))  # fmt: skip
    log = tmp_path / f"{job_id}.out"

    def lines() -> list[dict[str, Any]]:
        return _json_lines(progress)

    try:
        poll(lines, lambda p: len(p) >= 25, "25 batches", 120)
        nodes = slurm.json("show", str(job_id))["nodes"]
        agent = poll(lambda: _process(slurm, nodes[1], b"torchrun"), bool, "rank 1's agent", 30)
        before = lines()
        fault_at = time.time()
        os.kill(agent, 9)
        first = poll(lambda: next((e for e in lines()[len(before):]
                                   if e["pid"] != before[-1]["pid"]), None),
                     lambda e: e is not None, "a batch from restarted workers", 90)  # fmt: skip
        final = slurm.wait_job(job_id, set(TERMINAL), 180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{log.read_text()[-3000:] if log.exists() else ''}") from None
    finally:
        slurm.podium("cancel", str(job_id), check=False)
    assert first is not None
    print(f"torchrun on Slurm: fault -> next batch {first['t'] - fault_at:.1f} s")
    assert final["state"] == "COMPLETED" and final["restart_count"] == 0, log.read_text()[-3000:]
    told = final["replacements"]
    assert [(r["replaced"], r["node_from"], r["node_to"]) for r in told] == [
        ([1], nodes[1], nodes[2])], told  # fmt: skip
    events = lines()
    assert all(e["world"] == 2 for e in events) and events[-1]["epoch"] == 39, events[-1]
    assert "Resuming training from snapshot" in log.read_text()
