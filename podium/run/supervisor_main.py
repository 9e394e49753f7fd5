"""The supervisor process's entry point: `main([_, JOB_DIR, LOCK_FD])`, as the daemon's
launcher (podium.run.forkserver) or a fresh interpreter runs it. It takes the job's
lock, reads its plan, runs the Supervisor (podium.run.supervisor) from launch to
result, tells a job that could not start where its user looks
(podium.run.launch_failure), and records the result."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import time
from pathlib import Path

from podium.run.containment import ContainmentError
from podium.run.endwatch import notify_ended
from podium.run.files import PLAN_FILE, STARTED_FILE, read_json, write_atomic
from podium.run.job_files import task_files
from podium.run.launch_failure import LaunchFailure, failure_of, tell_user
from podium.run.plan import LaunchPlan
from podium.run.results import keep_result_room, record_result, result_record
from podium.run.spawn import SpawnError
from podium.run.stopping import STOP_SIGNALS, Stopped
from podium.run.supervisor import WATCHED, Supervisor
from podium.run.task_env import job_identity


def main(argv: list[str]) -> int:
    job_dir = Path(argv[1])
    lock_fd = int(argv[2])
    os.set_inheritable(lock_fd, False)
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # already ours; fails if it is not
    signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
    data = read_json(job_dir / PLAN_FILE)
    if data is None:
        return 2
    plan = LaunchPlan.from_json(data)
    start = time.time()
    keep_result_room(job_dir)
    try:
        sup = Supervisor(job_dir, plan)
    except ContainmentError as exc:
        failed = _launch_failed(plan, exc)
        record_result(
            job_dir, result_record("FAILED", failed.exit_code, None, start, reason=failed.reason)
        )
        return 0
    sup.start = start
    groups = sup.contain.groups
    started = {
        "pid": os.getpid(),  # also the session of every process the job starts
        "start_time": start,
        "cgroups": [str(p) for p in groups.paths] if groups else [],  # for cleanup
        "enforced": groups.enforced if groups else {},
        "problems": groups.problems if groups else [],
    }
    write_atomic(job_dir / STARTED_FILE, started, durable=False)
    try:
        sup.launch()
        sup.supervise()
    except Stopped as stop:  # cancelled, preempted, failed or out of time while starting
        sup.final_state, sup.stopped_at = stop.state, time.time()
        if stop.state == "NODE_FAIL":
            sup.fault = "node"
    except (SpawnError, OSError) as exc:
        if isinstance(exc, SpawnError) and signal.sigpending() & STOP_SIGNALS:
            sup.final_state = "CANCELLED"  # cancelled while it was starting
        else:
            sup.final_state, sup.launch_failure = "FAILED", _launch_failed(plan, exc)
            sup.reason = sup.launch_failure.reason
    except Exception:
        import traceback

        traceback.print_exc()
        sup.final_state, sup.reason = "FAILED", "supervisor error (see supervisor.log)"
    leftover = sup.contain.kill_all(reap=sup._reap)
    sup._reap()
    if sup.container and sup.container.get("save") and sup.final_state is None:
        sup.save_container()  # the tasks ended by themselves: save what they left
    if sup.container_state:  # the tasks' writable layers (a named one stays)
        from podium.run.containers.lifecycle import remove

        with job_identity(plan).entered():
            remove(sup.container_state)
    result = sup.result(leftover)
    sup.contain.release()
    record_result(job_dir, result)
    os.close(lock_fd)  # over: the result is written, every process of the job is gone
    notify_ended(str(job_dir.parent))
    return 0


def _launch_failed(plan: LaunchPlan, exc: BaseException) -> LaunchFailure:
    """What `exc` means for a job that never ran, written into its standard error
    file as its user (podium.run.launch_failure), as slurmstepd writes its errors."""
    failed = failure_of(exc)
    if plan.tasks:
        files = task_files(plan, plan.tasks[0])
        line = f"podium: error: {failed.reason}"
        tell_user(files.stderr or files.stdout, line, job_identity(plan))
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv))
