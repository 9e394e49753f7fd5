"""The daemon's side of local execution against a real supervisor process."""

from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from podium.run.executor import LocalExecutor, Poll
from podium.run.plan import LaunchPlan, TaskPlan
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration  # real processes, signals and process groups


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
    return poll(lambda: executor.poll(job_id), lambda seen: seen.status != "running",
                f"job {job_id} still running", 30, every=0.05)  # fmt: skip


def settle(executor: LocalExecutor) -> None:
    """Wait until every supervisor started cold (our children) has exited."""
    wait_until(lambda: executor.reap() == 0, "every cold supervisor to exit", 10)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_preemption_sent_while_the_supervisor_starts_waits_for_it(
    tmp_path: Path, warm: bool
) -> None:
    """Signals sent before the supervisor is up must not kill it (it would read as
    never launched and run again); it starts the job, then stops it."""
    executor = LocalExecutor(tmp_path / "jobs", warm=warm)
    try:
        for job_id, stop in ((1, executor.preempt), (2, executor.cancel)):
            executor.launch(plan_of(job_id, tmp_path), "#!/bin/sh\n")
            assert stop(job_id)  # at once: the supervisor is still starting
            poll = ended(executor, job_id)
            assert poll.status == "ended" and poll.result is not None, poll
            assert poll.result.state == ("PREEMPTED" if job_id == 1 else "CANCELLED")
            assert poll.result.signal == 15, poll.result
        settle(executor)
    finally:
        executor.close()


def test_a_warm_supervisor_is_forked_by_the_launcher_and_outlives_it(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "jobs")
    try:
        plan = plan_of(1, tmp_path)._replace(argv=["/bin/sh", "-c", "exit 7"])
        pid = executor.launch(plan, "#!/bin/sh\n")
        assert executor.launcher is not None and executor.launcher.pid is not None
        poll = ended(executor, 1)
        assert poll.result is not None and poll.result.exit_code == 7, poll
        sup = executor.launch(plan_of(2, tmp_path), "#!/bin/sh\n")
        assert sup != pid and psutil.Process(sup).ppid() == executor.launcher.pid
        started = executor.job_dir(2) / "started.json"
        wait_until(started.exists, f"{started} to be written", 10)
        assert os.getsid(sup) == sup  # a session of its own, as a cold start has
        executor.close()  # the daemon goes: the launcher exits, the job runs on
        assert executor.poll(2).status == "running"
        assert executor.cancel(2)
        assert ended(executor, 2).result.state == "CANCELLED"  # type: ignore[union-attr]
    finally:
        executor.close()


def test_a_killed_launcher_is_replaced_and_no_job_is_lost(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "jobs")
    try:
        executor.launch(plan_of(1, tmp_path), "#!/bin/sh\n")
        assert executor.launcher is not None and executor.launcher.pid is not None
        first = executor.launcher.pid
        os.kill(first, signal.SIGKILL)
        assert executor.poll(1).status == "running"  # its supervisor did not depend on it
        executor.launch(plan_of(2, tmp_path), "#!/bin/sh\n")
        assert executor.poll(2).status == "running"
        for job_id in (1, 2):
            assert executor.cancel(job_id)
            assert ended(executor, job_id).status == "ended"
        settle(executor)  # job 2 may have been started cold while the launcher died
    finally:
        executor.close()


def test_after_a_lost_launcher_the_lock_tells_whether_the_supervisor_was_forked(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    child = os.fork()
    if child == 0:  # a supervisor forked with the lock's open file
        time.sleep(30)
        os._exit(0)
    try:
        assert LocalExecutor._lock_held_elsewhere(tmp_path, fd)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert not LocalExecutor._lock_held_elsewhere(tmp_path, fd)  # nobody: ours again
    probe = os.open(lock, os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(probe)
    os.close(fd)


def test_a_signal_reaches_the_batch_shell_and_none_is_left_for_the_next_run(
    tmp_path: Path,
) -> None:
    """scancel --signal -b through the executor: the supervisor, woken, delivers it to
    the batch shell; a relaunch of the same job (a requeue) starts with no requests."""
    from podium.run.job_signals import SIGNALS_FILE

    executor = LocalExecutor(tmp_path / "jobs", warm=False)
    mark = tmp_path / "got-usr1"
    plan = plan_of(7, tmp_path)._replace(
        argv=["/bin/sh", "-c", f"trap 'touch {mark}; exit 0' USR1; touch {mark}.ready; "
              "while :; do sleep 0.05; done"],
    )  # fmt: skip
    try:
        executor.launch(plan, "#!/bin/sh\n")
        wait_until(Path(f"{mark}.ready").exists, "the job to set its trap", 20)
        assert executor.send_signal(7, signal.SIGUSR1, "batch")
        done = ended(executor, 7)
        assert mark.exists() and done.result is not None and done.result.state == "COMPLETED"
        assert (executor.job_dir(7) / SIGNALS_FILE).exists()
        settle(executor)
        executor.launch(plan._replace(argv=["/bin/true"]), "#!/bin/sh\n")
        assert not (executor.job_dir(7) / SIGNALS_FILE).exists()
        ended(executor, 7)
        settle(executor)
        assert not executor.send_signal(7, signal.SIGUSR1, "batch")  # none supervises it
    finally:
        executor.close()
