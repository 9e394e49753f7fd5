"""The daemon's side of local execution against a real supervisor process."""

from __future__ import annotations

import os
import time
from pathlib import Path

from podium.run.executor import LocalExecutor, Poll
from podium.run.plan import LaunchPlan, TaskPlan


def plan_of(job_id: int, tmp: Path) -> LaunchPlan:
    return LaunchPlan(
        job_id=job_id, name="t", user="me", uid=os.getuid(), gid=os.getgid(), groups=[],
        argv=["/bin/sh", "-c", "sleep 60"], work_dir=str(tmp), submit_dir=str(tmp),
        environment={"PATH": "/usr/bin:/bin"}, tasks=[TaskPlan(0, 0, [])],
        stdout=str(tmp / "out"), stderr=None, stdin=None, open_mode="truncate", node="n0",
        gpu_ids=[], cpus=1, cpus_per_task=1, time_limit_s=None, kill_wait_s=2.0,
        proctrack="pgid",
    )  # fmt: skip


def ended(executor: LocalExecutor, job_id: int) -> Poll:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        poll = executor.poll(job_id)
        if poll.status != "running":
            return poll
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still running")


def test_a_preemption_sent_while_the_supervisor_starts_waits_for_it(tmp_path: Path) -> None:
    """Signals sent before the supervisor's interpreter is up must not kill it (it would
    read as never launched and run again); it starts the job, then stops it."""
    executor = LocalExecutor(tmp_path / "jobs")
    for job_id, stop in ((1, executor.preempt), (2, executor.cancel)):
        executor.launch(plan_of(job_id, tmp_path), "#!/bin/sh\n")
        assert stop(job_id)  # at once: the interpreter is still importing
        poll = ended(executor, job_id)
        assert poll.status == "ended" and poll.result is not None, poll
        assert poll.result.state == ("PREEMPTED" if job_id == 1 else "CANCELLED")
        assert poll.result.signal == 15, poll.result
    executor.reap()
