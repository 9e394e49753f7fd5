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


def _told(c: Cluster, job: int) -> str:
    """Where the job is and why: its state, events and output's end."""
    shown = c.job(job)
    said = "\n".join(f"{e['time']:.1f} {e['kind']}: {e['detail']}" for e in shown["events"])
    out = c.work / f"torchrun-{job}.out"
    tail = out.read_text()[-3000:] if out.exists() else "(no output)"
    return f"job {shown['state']}:\n{said}\n{tail}"


@pytest.mark.parametrize(
    ("stack", "fault"), [("torchrun", "xid"), ("torchrun", "kill"), ("lightning", "xid")]
)
def test_a_torchrun_replica_lost_is_replaced_from_the_spare_without_a_requeue(
    make: Callable[..., Cluster], stack: str, fault: str
) -> None:
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
    poll(lambda: c.job(job)["replacements"], bool, "the replacement", 60)
    # the lost replica is gone, its workers too: a killed agent's orphans train on
    # until the survivors restart, on a GPU the daemon gave back
    left = {p: g for p, g in gpus_of_processes(c, job).items() if gpus[1] in g}
    assert not left, left
    final = c.wait(job, timeout=240)
    out = (c.work / f"torchrun-{job}.out").read_text()
    assert final["state"] == "COMPLETED" and final["restart_count"] == 0, _told(c, job)
    shown = c.job(job)
    [told] = shown["replacements"]
    assert told["replaced"] == [1] and told["gpus_from"] == [gpus[1]], told
    assert told["gpus_to"] == [gpus[2]] and told["warm"] is False, told  # a new agent
    events = _progress(c)
    restarts = sorted({e["restart"] for e in events})
    assert restarts[0] == 0 and len(restarts) >= 2, restarts  # TorchElastic restarted them
    after = [e for e in events if e["restart"] == restarts[-1]]
    assert all(e["world"] == 2 for e in events), {e["world"] for e in events}
    assert (after[-1]["epoch"], after[-1]["batch"]) == (EPOCHS - 1, 3)
    assert RESUMED[stack] in out, out[-3000:]
