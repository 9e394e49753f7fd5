"""torchrun (TorchElastic) and Lightning, unchanged, with spares (issue 63, item 2): a
job whose script runs `torchrun` holds a spare; each replica is a TorchElastic node, and
a fault on one replica (an Xid on its GPU, its agent killed) is replaced by a new agent
on the spare's GPUs, which TorchElastic's rendezvous takes in: no requeue, the workers
restarted from their checkpoint on the new set of GPUs, the job COMPLETED at its full
size. The scripts: examples/torchrun_ddp.py, PyTorch's own tutorial script, and
examples/lightning_ddp.py, a Lightning job as Lightning's docs write one for torchrun;
on gloo."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_replace_soak import gpus_of_processes
from tests.polling import poll

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EPOCHS = 60  # 4 batches each (256 samples, 32 per batch, 2 ranks)
SCRIPTS = {  # each stack's script, as its own docs write it, and its arguments
    "torchrun": f"{EXAMPLES / 'torchrun_ddp.py'} {EPOCHS} 1 --snapshot-path {{work}}/snapshot.pt",
    "lightning": f"{EXAMPLES / 'lightning_ddp.py'} --epochs {EPOCHS} --checkpoints {{work}}/ckpt",
}
RESUMED = {"torchrun": "Resuming training from snapshot", "lightning": "Restoring states from"}


def _submit(c: Cluster, stack: str = "torchrun") -> int:
    """The job as a torchrun user writes it: Podium's MASTER_ADDR/PORT as the rendezvous
    endpoint, --nnodes its replica count, restarts allowed (and no --rdzv-conf: Podium's
    keep-alive, 1 s x 2, applies)."""
    bin_dir = os.path.dirname(sys.executable)
    script = c.script(
        f"export PATH={bin_dir}:$PATH\n"
        "exec torchrun --nnodes=2 --nproc-per-node=1 --max-restarts=3 \\\n"
        "    --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT \\\n"
        "    --rdzv-id=$SLURM_JOB_ID \\\n"
        f"    {SCRIPTS[stack].format(work=c.work)} \\\n"
        f"    --progress {c.work}/p.jsonl --step-time 0.05\n"
    )
    return c.submit("--elastic=2:2", "--spares=1", "--gpus-per-task=1", "--auto-resume=1",
                    "-o", "torchrun-%j.out", str(script), cwd=c.work)  # fmt: skip


def _progress(c: Cluster) -> list[dict[str, Any]]:
    path = c.work / "p.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _told(c: Cluster, job: int, output: str = "torchrun") -> str:
    """Where the job is and why: its state, events and output's end (OUTPUT-JOB.out)."""
    shown = c.job(job)
    said = "\n".join(f"{e['time']:.1f} {e['kind']}: {e['detail']}" for e in shown["events"])
    out = c.work / f"{output}-{job}.out"
    tail = out.read_text()[-3000:] if out.exists() else "(no output)"
    return f"job {shown['state']}:\n{said}\n{tail}"


@pytest.mark.parametrize(("stack", "fault"), [("torchrun", "kill"), ("lightning", "xid")])
def test_a_torchrun_replica_lost_is_replaced_from_the_spare_without_a_requeue(
    make: Callable[..., Cluster], stack: str, fault: str
) -> None:
    """With `kill`, a second fault follows once training went on: an Xid on rank 0's
    GPU, the replica whose agent was the first to join (Podium's store host keeps the
    rendezvous), replaced by the spare the daemon refilled."""
    if stack == "lightning":
        pytest.importorskip("lightning")
    c = make()
    job = _submit(c, stack)
    try:
        poll(lambda: _progress(c), lambda p: len(p) >= 12, "three epochs", 120)
    except AssertionError as late:
        raise AssertionError(f"{late}; {_told(c, job)}") from None
    gpus = c.job(job)["gpu_ids"]
    assert len(gpus) == 3  # two replicas and the spare
    if fault == "xid":
        c.cli("inject", "xid", "--gpu", str(gpus[1]), "--code", "79", check=True)
    else:
        c.cli("inject", "kill", str(job), "--rank", "1", check=True)
    _replaced(c, job, 1, gpus[1])
    faults = [(1, gpus[1], gpus[2])]  # (rank, from, to)
    if fault == "kill":  # then rank 0's GPU, once the spare is refilled and it trains on
        [fourth] = set(range(4)) - set(gpus)
        poll(lambda: c.job(job)["gpu_ids"], lambda held: fourth in held, "the refill", 60)
        poll(lambda: [e for e in _progress(c) if e["restart"] > 0], lambda p: len(p) >= 4,
             "four batches after TorchElastic's restart", 60)  # fmt: skip
        c.cli("inject", "xid", "--gpu", str(gpus[0]), "--code", "79", check=True)
        _replaced(c, job, 2, gpus[0])
        faults.append((0, gpus[0], fourth))
    final = c.wait(job, timeout=240)
    out = (c.work / f"torchrun-{job}.out").read_text()
    assert final["state"] == "COMPLETED" and final["restart_count"] == 0, _told(c, job)
    told = c.job(job)["replacements"]
    assert [(r["replaced"], r["gpus_from"], r["gpus_to"]) for r in told] == [
        ([rank], [lost], [to]) for rank, lost, to in faults], told  # fmt: skip
    assert not any(r["warm"] for r in told), told  # each time a new agent
    events = _progress(c)
    runs = _runs(events)
    assert len(runs) > len(faults), [(r[0], r[-1]) for r in runs]  # TorchElastic restarted
    assert all(e["world"] == 2 for e in events), {e["world"] for e in events}
    assert (runs[-1][-1]["epoch"], runs[-1][-1]["batch"]) == (EPOCHS - 1, 3)
    assert out.count(RESUMED[stack]) >= len(faults), out[-3000:]  # from the checkpoint


def _runs(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The progress lines, split where the workers were restarted: rank 0's process
    changed (TorchElastic's restart count cannot tell: it is the writing agent's own,
    and a new agent's starts at 0)."""
    runs: list[list[dict[str, Any]]] = []
    for e in events:
        if not runs or e["pid"] != runs[-1][-1]["pid"]:
            runs.append([])
        runs[-1].append(e)
    return runs


def _replaced(c: Cluster, job: int, count: int, lost: int) -> None:
    """Wait for the job's `count`th replacement; then no process of the job is left on
    the GPU it lost: a killed agent's orphaned workers would train on until the
    survivors restart, on a GPU the daemon gave back."""
    poll(lambda: c.job(job)["replacements"], lambda r: len(r) >= count, "the replacement", 60)
    left = {p: g for p, g in gpus_of_processes(c, job).items() if lost in g}
    assert not left, left
