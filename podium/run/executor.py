"""The daemon's side of local execution: start supervisors and read their outcomes.

Launch protocol (so that no job runs twice and none is lost across a daemon crash):
1. the daemon takes an exclusive flock on JOB_DIR/lock and starts the supervisor with
   that descriptor inherited, then closes its own copy: from then on the lock is held
   exactly as long as the supervisor lives. The supervisor is forked by a warm
   launcher (podium.run.forkserver), which receives the descriptor with the request;
   when the launcher is gone, a new interpreter is started instead, unless the lock
   shows that the launcher forked the supervisor before it went;
2. the supervisor writes started.json, runs the job, writes result.json and exits.

`poll()` tells the state from outside with no shared memory: lock held -> running;
result.json -> ended; started.json without result and without lock -> the supervisor
died (NODE_FAIL); neither -> never launched (safe to launch again), unless the jobs
directory itself was lost (a tmpfs after a reboot, podium.run.rundir): then no one
can tell, and the run is lost (NODE_FAIL), never launched a second time unknowingly.

A job's directory is runtime state: `forget()` removes it once the daemon has
recorded the run's end.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.run import job_signals
from podium.run.cgroups import read_pids
from podium.run.containment import process_alive, session_members
from podium.run.files import (
    CONTAINMENT_FILE,
    FAULT_FILE,
    LIMIT_FILE,
    LOCK_FILE,
    PLAN_FILE,
    REQUEUE_FILE,
    RESIZE_FILE,
    RESULT_FILE,
    SAVED_FILE,
    SCRIPT_FILE,
    STARTED_FILE,
    SUPERVISOR_LOG,
    TASKS_FILE,
    read_json,
    write_atomic,
)
from podium.run.job_result import JobResult
from podium.run.launcher import Launcher, LauncherLost
from podium.run.plan import LaunchPlan
from podium.run.steps import STEPS_DIR, read_steps, running_step_pids, step_record
from podium.run.supervisor import WATCHED
from podium.run.supervisor_orders import SupervisorOrders


@contextlib.contextmanager
def _restoring_mask(mask: set[int | signal.Signals]) -> Iterator[None]:
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


log = logging.getLogger("podium.executor")

# A cold start runs `-c`, not `-m podium.run.supervisor`: runpy costs ~9 ms here. The
# command line still names the module (what `ps` shows and tests look for).
LOG_KEPT = 64 * 1024  # of a supervisor's log, kept in the daemon's when its job is forgotten

SUPERVISOR_MAIN = (
    "import sys; from podium.run.supervisor_main import main; sys.exit(main(sys.argv))"
)


class LaunchError(Exception):
    """The supervisor could not be started."""


@dataclass(frozen=True)
class Poll:
    """The outside view of one job: `status` is running, ended, vanished or unlaunched."""

    status: str
    result: JobResult | None = None


class LocalExecutor(SupervisorOrders):
    """Starts supervisors for jobs under `jobs_dir`, reads their outcomes, and gives
    them orders (SupervisorOrders: cancel, preempt, requeue, resize, ...)."""

    def __init__(
        self,
        jobs_dir: Path,
        python: str = sys.executable,
        warm: bool = True,
        lost_runs: bool = False,
    ) -> None:
        """`warm`: fork supervisors from a warm launcher (podium.run.launcher), falling
        back to a new interpreter per job when it fails; False: always the latter.
        `lost_runs`: the directories of runs started before this executor are gone
        (podium.run.rundir.JobsDir): a job without one polls "lost", not
        "unlaunched"."""
        self.jobs_dir = jobs_dir
        self.lost_runs = lost_runs
        self.python = python
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # cold starts, by job id
        self._pids: dict[int, int] = {}  # supervisors started, by job id
        jobs_dir.mkdir(parents=True, exist_ok=True)
        self.launcher = Launcher(jobs_dir, python) if warm else None

    def close(self) -> None:
        """Stop the launcher (supervisors keep running)."""
        if self.launcher is not None:
            self.launcher.close()

    def launch(self, plan: LaunchPlan, script: str) -> int:
        """Write the plan and script, start the job's supervisor; return its pid.

        Raises LaunchError if a supervisor for this job still holds its lock.
        """
        job_dir = self.job_dir(plan.job_id)
        job_dir.mkdir(exist_ok=True)
        os.chmod(job_dir, 0o711)  # the user reaches its script by name; the rest is private
        lock_fd = os.open(job_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LaunchError(f"job {plan.job_id} is still supervised") from None
            for stale in (
                STARTED_FILE,
                RESULT_FILE,
                FAULT_FILE,
                REQUEUE_FILE,
                RESIZE_FILE,
                SAVED_FILE,
                TASKS_FILE,
                LIMIT_FILE,
                job_signals.SIGNALS_FILE,  # a signal sent to the last run is not this one's
            ):
                (job_dir / stale).unlink(missing_ok=True)
            self._fresh_step_dir(job_dir / STEPS_DIR, plan.uid, plan.gid)
            script_path = job_dir / SCRIPT_FILE
            script_path.unlink(missing_ok=True)
            fd = os.open(script_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o500)
            with os.fdopen(fd, "w") as fh:
                fh.write(script)
            if os.geteuid() == 0:
                os.chown(script_path, plan.uid, plan.gid)
            # Not fsynced: after a power loss the supervisor is gone too, and the job
            # reads as never launched.
            write_atomic(job_dir / PLAN_FILE, plan.to_json(), durable=False, mode=0o600)
            log_fd = os.open(
                job_dir / SUPERVISOR_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
            )
            try:
                pid = self._start_supervisor(job_dir, lock_fd, log_fd)
            finally:
                os.close(log_fd)
        finally:
            os.close(lock_fd)
        self._pids[plan.job_id] = pid
        return pid

    def _start_supervisor(self, job_dir: Path, lock_fd: int, log_fd: int) -> int:
        """Start the supervisor, holding `lock_fd`, warm when the launcher answers, else
        as a new interpreter; its pid (0 when a launcher that died mid-way is known
        only to have started it: the lock is held)."""
        if self.launcher is not None:
            try:
                return self.launcher.start(job_dir, lock_fd, log_fd)
            except LauncherLost as exc:
                log.warning("supervisor launcher: %s; starting job %s cold", exc, job_dir.name)
                if self._lock_held_elsewhere(job_dir, lock_fd):
                    return 0  # forked before the launcher died: the child holds the lock
        # The supervisor is born with its signals blocked: a cancel or preemption sent
        # while its interpreter still starts waits for it, rather than killing it
        # before it has started anything (read as never launched).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        with _restoring_mask(blocked):
            proc = subprocess.Popen(
                [self.python, "-c", SUPERVISOR_MAIN, str(job_dir), str(lock_fd)],
                pass_fds=(lock_fd,),
                start_new_session=True,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                cwd="/",
            )
        self._children[int(job_dir.name)] = proc
        return proc.pid

    @staticmethod
    def _lock_held_elsewhere(job_dir: Path, lock_fd: int) -> bool:
        """Whether a process other than us (a forked child) holds the job's lock.

        A lock belongs to an open file, and ours is shared with any child: so our
        descriptor `lock_fd` is replaced by a new open file of the lock (dup2 drops
        the old one in the same step), and the lock tried on that. True: someone else
        holds it. False: nobody did, and `lock_fd` now holds it for us again.
        """
        fresh = os.open(job_dir / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(fresh, lock_fd, inheritable=False)
        os.close(fresh)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False

    @staticmethod
    def _fresh_step_dir(path: Path, uid: int, gid: int) -> None:
        """An empty step directory the job's user owns (podium.run.steps); a previous
        run's is removed (rmtree does not follow the user's links)."""
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        path.mkdir(mode=0o700)
        if os.geteuid() == 0:
            os.chown(path, uid, gid)

    def poll(self, job_id: int) -> Poll:
        """The job's status as seen from its files and lock (see the module docstring):
        running, ended (with its result), vanished, unlaunched or lost.

        A job is over only once its supervisor has let go of the lock: result.json is
        written just before that, and a job relaunched while its previous supervisor
        still exits would find the lock taken.
        """
        job_dir = self.job_dir(job_id)
        if self.lost_runs and not job_dir.exists():
            self._pids.pop(job_id, None)
            return Poll("lost")
        if self._lock_held(job_dir):
            return Poll("running")
        self._pids.pop(job_id, None)
        data = read_json(job_dir / RESULT_FILE)  # written before the lock was let go
        if data is not None:
            return Poll("ended", JobResult.from_dict(data))
        if (job_dir / STARTED_FILE).exists():
            return Poll("vanished")
        return Poll("unlaunched")

    def live_steps(self, job_id: int) -> list[dict[str, Any]]:
        """A running job's steps so far: the batch step (running since the supervisor
        started) and the srun steps recorded in its step directory (read distrustfully,
        see podium.run.steps)."""
        job_dir = self.job_dir(job_id)
        started = read_json(job_dir / STARTED_FILE)
        if started is None:
            return []
        batch = step_record(
            0, name="batch", ntasks=1, node="", gpus=[], pgid=None,
            start=float(started.get("start_time") or 0),
        )  # fmt: skip
        batch["step_id"] = "batch"
        return [batch, *read_steps(job_dir / STEPS_DIR)]

    def session(self, job_id: int) -> int | None:
        """The session of the job's processes (its supervisor's pid), once started."""
        started = read_json(self.job_dir(job_id) / STARTED_FILE)
        return int(started["pid"]) if started is not None else None

    def task_pids(self, job_id: int) -> dict[int, int]:
        """Each running task's pid by rank: the newest running srun step's tasks, else
        the batch step's (empty until they have started). The step records are the
        job's own writing, so only pids in the job's session are given."""
        job_dir = self.job_dir(job_id)
        started = read_json(job_dir / STARTED_FILE)
        if started is None:
            return {}
        pids = running_step_pids(read_steps(job_dir / STEPS_DIR))
        if not pids:
            data = read_json(job_dir / TASKS_FILE) or {}
            pids = {int(k): int(v) for k, v in data.items()}
        return {rank: pid for rank, pid in pids.items() if _session(pid) == started["pid"]}

    def kill_leftovers(self, job_id: int, scan_session: bool = True) -> int:
        """SIGKILL whatever is left of a job whose supervisor is gone: the processes in
        its cgroups and, with `scan_session`, those still in the supervisor's session.
        Returns how many are still alive afterwards; 0 means none (its groups are then
        removed). Idempotent: call it again until it returns 0."""
        job_dir = self.job_dir(job_id)
        started = read_json(job_dir / STARTED_FILE) or {}
        if "cgroups" not in started:  # a supervisor of a version before 2026-11
            started |= read_json(job_dir / CONTAINMENT_FILE) or {}
        groups = [Path(p) for p in started.get("cgroups", [])]
        sid = int(started.get("sid") or started.get("pid") or 0)
        if scan_session and sid and process_alive(sid):
            scan_session = False  # the number belongs to a live process: not our session

        def left() -> set[int]:
            pids: set[int] = set()
            for group in groups:
                pids |= read_pids(group)
            if scan_session and sid:
                pids |= session_members(sid)
            pids.discard(os.getpid())
            return {p for p in pids if process_alive(p)}

        deadline = time.monotonic() + 2.0
        pids = left()
        while pids and time.monotonic() < deadline:
            for group in groups:
                with contextlib.suppress(OSError):
                    (group / "cgroup.kill").write_text("1")
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)
            pids = left()
        if not pids:
            for group in reversed(groups):
                with contextlib.suppress(OSError):
                    group.rmdir()
        return len(pids)

    def reap(self) -> int:
        """Collect supervisors this daemon started cold that have exited (no zombies);
        how many are still running. (Warm ones are the launcher's children.)"""
        for job_id, proc in list(self._children.items()):
            if proc.poll() is not None:
                del self._children[job_id]
        return len(self._children)

    def forget(self, job_id: int) -> None:
        """Remove the directory of a run whose end is recorded (what the daemon needs
        of it is in the store). What its supervisor wrote to its log, if anything, is
        kept in the daemon's log first (its first LOG_KEPT bytes).

        Call it only once no supervisor of the job runs (poll() is not "running")."""
        job_dir = self.job_dir(job_id)
        with contextlib.suppress(OSError), open(job_dir / SUPERVISOR_LOG, "rb") as fh:
            text = fh.read(LOG_KEPT).decode(errors="replace").strip()
            if text:
                log.warning("job %s: its supervisor wrote:\n%s", job_id, text)
        shutil.rmtree(job_dir, ignore_errors=True)
        self._pids.pop(job_id, None)

    def forget_others(self, keep: set[int]) -> int:
        """forget() every job directory but those of `keep` (the runs still recorded
        as running): what an earlier daemon left after recording their ends. Returns
        how many were removed."""
        with os.scandir(self.jobs_dir) as entries:
            stale = [
                int(e.name)
                for e in entries
                if e.name.isdigit() and int(e.name) not in keep and e.is_dir()
            ]
        removed = 0
        for job_id in stale:
            if not self._lock_held(self.job_dir(job_id)):
                self.forget(job_id)
                removed += 1
        return removed
