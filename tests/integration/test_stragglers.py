"""A straggler in a running job is named (issue 48, item 4): each rank of
examples/train.py says what its step took before its first collective; the daemon looks
every health interval and names the rank that stays slow in `podium show`, the job's
events and /metrics (podium_rank_step_seconds). A healthy run names none."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_replace import EXAMPLES
from tests.polling import poll

pytestmark = pytest.mark.integration


def submit(c: Cluster, more: str = "") -> int:
    return c.submit(
        "--elastic=2:2", "--gpus-per-task=1", "--heartbeat-timeout=60",
        f"--checkpoint-dir={c.work / 'ckpt'}", "-o", "train-%j.out",
        "--wrap", f"exec {sys.executable} {EXAMPLES / 'train.py'} --model gpt --steps 150 "
        f"--step-time 0.05 --report-every 0 {more}", cwd=c.work,
    )  # fmt: skip


def metrics(c: Cluster) -> str:
    with c.api() as api:
        return str(api.get("/metrics").text)


@pytest.mark.quiet  # its bounds hold on an otherwise idle machine
def test_a_slow_rank_is_named_and_its_seconds_are_in_the_metrics(
    make: Callable[..., Cluster],
) -> None:
    c = make()
    job = submit(c, "--straggle 1:0.15")
    shown = poll(lambda: c.job(job), lambda j: j.get("straggler"), "a straggler named", 90)
    assert re.match(r"rank 1: 0\.\d+ s a step outside collectives against 0\.\d+ s", shown[
        "straggler"]), shown["straggler"]  # fmt: skip
    seconds = {int(r): s for r, s in shown["rank_step_seconds"].items()}
    assert seconds[1] > 2 * seconds[0], seconds
    events = [e["detail"] for e in shown["events"] if e["kind"] == "straggler"]
    assert len(events) == 1 and events[0].startswith("rank 1:"), events
    text = metrics(c)
    labels = f'job_id="{job}",rank="(\\d)",user="[^"]*"'
    found = dict(re.findall(r"podium_rank_step_seconds\{" + labels + r"\} (\S+)", text))
    assert set(found) == {"0", "1"} and float(found["1"]) > float(found["0"]), found
    straggler = f'podium_job_straggler_rank{{job_id="{job}",user="'
    assert re.search(re.escape(straggler) + r'[^"]*"\} 1\.0', text), text[-2000:]
    # not waited to its end: the slow rank makes the run 30 s, which this test, run
    # alone (quiet), would hold the whole machine for


@pytest.mark.quiet  # its bounds hold on an otherwise idle machine
def test_a_healthy_run_names_no_straggler(make: Callable[..., Cluster]) -> None:
    c = make()
    job = submit(c)
    poll(lambda: c.job(job), lambda j: j.get("rank_step_seconds"), "the ranks' seconds", 90)
    final = c.wait(job, timeout=120)
    assert final["state"] == "COMPLETED"
    assert not [e for e in c.job(job)["events"] if e["kind"] == "straggler"]
