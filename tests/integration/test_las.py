"""Least attained service on the real daemon (`scheduler.order: las`): a job that has
had more service than the first queue's limit is stopped for a new one once it has
run the minimum, saves in its grace, is requeued and resumes with its service
counted; a job that never checkpointed is never stopped for it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import (
    Cluster,
    make_cluster,
    open_the_blocker,
    qos_trio_behind_a_blocker,
    teardown_cluster,
)
from tests.polling import wait_until

pytestmark = pytest.mark.integration

LAS = """\
scheduler:
  order: las
  las: {queue_limits: [8], min_run: "0:04", starve_factor: null}
"""

# Counts to 40 in quarter seconds, resuming from the step it saved; on SIGTERM it
# saves and says so (`podium checkpoint`), which ends its grace at once.
RESUMABLE = (
    "f=$PWD/steps-$SLURM_JOB_ID; i=$(cat $f 2>/dev/null || echo 0); "
    "trap 'echo $i > $f; podium checkpoint --step $i >/dev/null; sleep 100' TERM; "
    "podium checkpoint --step $i >/dev/null; echo started at $i; "
    "while [ $i -lt 40 ]; do i=$((i+1)); sleep 0.25; done; echo done at $i"
)


@pytest.fixture
def las_cluster() -> Iterator[Cluster]:
    c = make_cluster(kill_wait=30.0, extra=LAS)
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


def _events(c: Cluster, job_id: int, kind: str) -> list[dict[str, object]]:
    return [e for e in c.job(job_id)["events"] if e["kind"] == kind]


def test_a_served_job_is_stopped_for_a_new_one_and_resumes_with_its_service(
    las_cluster: Cluster,
) -> None:
    c = las_cluster
    served = c.submit(
        "--gpus=4", "-J", "served", "--open-mode=append", "--chdir", str(c.work),
        "--wrap", RESUMABLE,
    )  # fmt: skip
    c.wait(served, {"RUNNING"})
    wait_until(lambda: _events(c, served, "checkpoint"), "served's first checkpoint report")
    started = c.job(served)["start_epoch"]
    new = c.submit("--gpus=2", "-J", "new", "--wrap", "sleep 1")
    c.wait(new, {"RUNNING"}, timeout=30)
    shown = c.job(new)
    # 4 GPUs pass the 8 GPU-second limit at 2 s, but the run is spared until 4 s
    assert shown["start_epoch"] - started >= 4.0
    assert c.wait(new, timeout=30)["state"] == "COMPLETED"
    done = c.wait(served, timeout=60)
    assert done["state"] == "COMPLETED" and done["restart_count"] == 1, done
    assert done["lost_gpu_seconds"].get("preemption", 0) == 0, done["lost_gpu_seconds"]
    out = Path(done["stdout"]).read_text()
    resumed = [int(line.split()[-1]) for line in out.splitlines() if line.startswith("started")]
    assert resumed[0] == 0 and resumed[1] >= 14, out  # it kept what it did before
    assert "done at 40" in out
    # its first run's GPU-seconds count as attained service (4 GPUs x >= 4 s)
    assert done["gpu_seconds_all_runs"] >= 16 + done["gpu_seconds"] - 0.5, done
    requeues = _events(c, served, "requeue")
    assert [e["detail"] for e in requeues] == ["preempted"], requeues


@pytest.mark.parametrize("kind", ["never checkpointed", "--no-requeue"])
def test_a_job_that_cannot_come_back_whole_is_not_stopped(las_cluster: Cluster, kind: str) -> None:
    """Neither a job that never checkpointed (it would lose its work) nor one that
    checkpoints but said --no-requeue (it would end, not come back)."""
    c = las_cluster
    if kind == "--no-requeue":
        work = "podium checkpoint --step 1 >/dev/null; sleep 8"
        plain = c.submit("--gpus=4", "--no-requeue", "-J", "plain", "--wrap", work)
        wait_until(lambda: _events(c, plain, "checkpoint"), "its checkpoint report")
    else:
        plain = c.submit("--gpus=4", "-J", "plain", "--wrap", "sleep 8")
    c.wait(plain, {"RUNNING"})
    began = time.time()
    new = c.submit("--gpus=2", "-J", "new", "--wrap", "true")
    wait_until(lambda: time.time() - began > 6, "six seconds past the minimum run")
    assert c.job(new)["state"] == "PENDING" and c.job(plain)["state"] == "RUNNING"
    assert c.wait(plain, timeout=30)["restart_count"] == 0
    assert c.wait(new, timeout=30)["state"] == "COMPLETED"


def test_a_high_qos_job_goes_first_in_the_default_queue(las_cluster: Cluster) -> None:
    """Issue 62: QoS priority orders the default queue as Slurm's does (least attained
    service within a QoS): submitted low, normal, high behind a blocker, the high one
    waits for Resources and the others behind it for Priority; `podium priority` (like
    sprio) shows that order, and the jobs start in it."""
    c = las_cluster
    low, normal, high = qos_trio_behind_a_blocker(c)
    c.wait_reason(high, "Resources")
    reasons = {j: c.job(j)["reason"] for j in (low, normal, high)}
    assert reasons == {low: "Priority", normal: "Priority", high: "Resources"}, reasons
    shown = json.loads(c.cli("priority", "--json", check=True).stdout)  # like sprio
    assert [(j["job_id"], j["order"], j["las_queue"], j["attained_gpu_s"]) for j in shown] == [
        (high, "las", 0, 0.0), (normal, "las", 0, 0.0), (low, "las", 0, 0.0)
    ], shown  # fmt: skip
    open_the_blocker(c)
    jobs = {j: c.wait(j, timeout=30) for j in (low, normal, high)}
    assert jobs[high]["start_time"] <= jobs[normal]["start_time"] <= jobs[low]["start_time"]
