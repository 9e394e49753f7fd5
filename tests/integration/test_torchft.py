"""torchft, unchanged, with spares (issue 63, item 2): a --torchft job's replicas are
torchft replica groups, each its own `torchrun`, and Podium runs the lighthouse. A
fault on one group (its torchrun killed, an Xid on its GPU) kills that group alone and
starts it again on the spare's GPUs; the other group keeps its process and trains on,
and the new one is healed live from it at the next quorum: no requeue, no step
trained twice. The script: examples/torchft_ddp.py, torchft's train_ddp.py on
synthetic data (with the disk checkpoint it leaves to its user); on gloo."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_replace_soak import gpus_of_processes
from tests.integration.test_torchrun import _progress
from tests.integration.test_torchrun import _told as told
from tests.polling import poll

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torchft_ddp.py"
STEPS = 400


def _submit(c: Cluster) -> int:
    """The job as torchft's own torchx component runs a replica group: one torchrun of
    one node per group, on the group's store (MASTER_PORT, Podium's per group)."""
    bin_dir = os.path.dirname(sys.executable)
    script = c.script(
        f"export PATH={bin_dir}:$PATH\n"
        "exec torchrun --nnodes=1 --nproc-per-node=1 \\\n"
        "    --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT \\\n"
        f"    {EXAMPLE} --steps {STEPS} --progress {c.work}/p.jsonl --step-time 0.05 \\\n"
        f"    --checkpoint {c.work}/ckpt.pt --save-every 20\n"
    )
    return c.submit("--elastic=2:2", "--spares=1", "--gpus-per-task=1", "--torchft",
                    "--auto-resume=1", "-o", "torchft-%j.out", str(script), cwd=c.work)  # fmt: skip


def _told(c: Cluster, job: int) -> str:
    return told(c, job, "torchft")


def _pids(events: list[dict[str, Any]], group: int) -> list[int]:
    """The worker processes of `group` in the order they wrote."""
    seen: list[int] = []
    for e in events:
        if e["group"] == group and (not seen or seen[-1] != e["pid"]):
            seen.append(e["pid"])
    return seen


def test_a_torchft_replica_group_lost_is_restarted_on_the_spare_and_healed_live(
    make: Callable[..., Cluster],
) -> None:
    """Group 1's torchrun killed, then, once the spare is refilled, an Xid on group 0's
    GPU: each time the other group keeps its process, the lost one comes back on a
    spare as the same REPLICA_GROUP_ID and joins at the peers' step.

    torchft 0.2.0's own crash (docs/resiliency.md, "torchft"): a survivor whose
    allreduce is under way when its peer dies fails `assert fut._fut` and exits 1.
    Podium replaces it too, as any crashed group; such a replacement is let through
    only with that assertion in the output, and the steps are then checked per
    process (the groups restart from the disk checkpoint where none is left to heal
    from)."""
    pytest.importorskip("torchft")
    c = make()
    job = _submit(c)
    try:
        poll(_progress_of(c), lambda p: {e["group"] for e in p if e["participants"] == 2}
             == {0, 1} and len(p) >= 40, "both groups training together", 120)  # fmt: skip
    except AssertionError as late:
        raise AssertionError(f"{late}; {_told(c, job)}") from None
    gpus = c.job(job)["gpu_ids"]
    assert len(gpus) == 3  # two groups and the spare
    c.cli("inject", "kill", str(job), "--rank", "1", check=True)
    _replaced(c, job, 1, gpus[1])
    _healed(c, 1, after=len(_progress(c)))
    [fourth] = set(range(4)) - set(gpus)
    poll(lambda: c.job(job)["gpu_ids"], lambda held: fourth in held, "the refill", 60)
    held = _gpu_of_groups(gpus, c.job(job)["replacements"])
    count = len(c.job(job)["replacements"])
    c.cli("inject", "xid", "--gpu", str(held[0]), "--code", "79", check=True)
    _replaced(c, job, count + 1, held[0])
    _healed(c, 0, after=len(_progress(c)))
    final = c.wait(job, timeout=240)
    assert final["state"] == "COMPLETED" and final["restart_count"] == 0, _told(c, job)
    told = c.job(job)["replacements"]
    out = (c.work / f"torchft-{job}.out").read_text()
    crashed = [r for r in told if re.fullmatch(r"rank \d+ exited with code 1", r["reason"])]
    assert out.count("assert fut._fut") >= len(crashed), _told(c, job)  # torchft's own
    injected = [(r["replaced"], r["gpus_from"], r["reason"].split(":")[0])
                for r in told if r not in crashed]  # fmt: skip
    assert injected == [([1], [gpus[1]], "rank 1 killed by signal 9"),
                        ([0], [held[0]], "health")], told  # fmt: skip
    events = _progress(c)
    for group in (0, 1):  # a group's process changed only where Podium replaced it
        replaced = sum(r["replaced"] == [group] for r in told)
        assert 2 <= len(_pids(events, group)) <= 1 + replaced, (group, told)
    for pid in {e["pid"] for e in events}:  # no step trained twice by one process
        steps = [e["step"] for e in events if e["pid"] == pid]
        assert steps == sorted(set(steps)), (pid, steps)
    if not crashed:  # every newcomer healed from a live peer: no step trained twice at all
        first = next(e for e in events if e["pid"] == _pids(events, 1)[1])
        peer = max(e["step"] for e in events if e["group"] == 0 and e["t"] < first["t"])
        assert first["step"] >= peer, (first, peer)  # healed: at its peer's step
        for group in (0, 1):
            steps = [e["step"] for e in events if e["group"] == group]
            assert steps == sorted(set(steps)), (group, steps)
    assert max(e["step"] for e in events) == STEPS


def _gpu_of_groups(gpus: list[int], told: list[dict[str, Any]]) -> dict[int, int]:
    """Each group's GPU now: where it started, then where each replacement put it."""
    held = {0: gpus[0], 1: gpus[1]}
    for r in told:
        held[r["replaced"][0]] = r["gpus_to"][0]
    return held


def _progress_of(c: Cluster) -> Callable[[], list[dict[str, Any]]]:
    return lambda: _progress(c)


def _replaced(c: Cluster, job: int, count: int, lost: int) -> None:
    """Wait for the job's `count`th replacement; then no process of the job is left on
    the GPU it lost (a killed torchrun's orphaned worker would train on)."""
    poll(lambda: c.job(job)["replacements"], lambda r: len(r) >= count, "the replacement", 60)
    left = {p: g for p, g in gpus_of_processes(c, job).items() if lost in g}
    assert not left, left


def _healed(c: Cluster, group: int, after: int) -> None:
    """Wait until the restarted `group` has committed a step together with its peer."""
    poll(lambda: _progress(c)[after:],
         lambda p: any(e["group"] == group and e["participants"] == 2 for e in p),
         f"group {group} back in the quorum", 90)  # fmt: skip
