"""Orders to a job's running supervisor (podium.run.supervisor), as the daemon gives
them: a signal to its pid, with a file in the job's directory saying more where the
signal alone cannot (a requeue, a resize, a new time limit, a hardware fault, a
checkpoint the job finished, a signal for its steps). A supervisor is alive exactly as
long as it holds the job's lock; an order to one that is not returns False."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path
from typing import Any

from podium.run import job_signals
from podium.run.files import (
    FAULT_FILE,
    LIMIT_FILE,
    LOCK_FILE,
    REQUEUE_FILE,
    RESIZE_FILE,
    SAVED_FILE,
    STARTED_FILE,
    read_json,
    read_json_safely,
    write_atomic,
)
from podium.run.rank_beats import RANKS_DIR, read_step_seconds
from podium.run.replace import SPARE_ORDERS, read_dropped_spares, read_replacements


class SupervisorOrders:
    """The orders half of podium.run.executor.LocalExecutor: each job's directory is
    `job_dir(job_id)`; `_pids` holds the supervisors started but not yet written to
    started.json (an order to one waits, blocked, until it runs)."""

    jobs_dir: Path
    _pids: dict[int, int]

    def job_dir(self, job_id: int) -> Path:
        return self.jobs_dir / str(job_id)

    @staticmethod
    def _lock_held(job_dir: Path) -> bool:
        try:
            fd = os.open(job_dir / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases the lock if we took it
        return False

    def cancel(self, job_id: int) -> bool:
        """Ask the job's supervisor to cancel it (SIGTERM). False if none is alive."""
        return self._signal(job_id, signal.SIGTERM)

    def preempt(self, job_id: int) -> bool:
        """Ask the job's supervisor to preempt it (SIGUSR1): the job gets its --signal or
        SIGTERM, the grace time, then SIGKILL, and ends PREEMPTED."""
        return self._signal(job_id, signal.SIGUSR1)

    def requeue(self, job_id: int) -> bool:
        """Ask the job's supervisor to stop it for a requeue (`scontrol requeue`): as a
        preemption, but with SIGTERM rather than the job's --signal (a USR1 trap that
        asked for the requeue must not run again)."""
        write_atomic(self.job_dir(job_id) / REQUEUE_FILE, {"signal": int(signal.SIGTERM)})
        return self._signal(job_id, signal.SIGUSR1)

    def resize(self, job_id: int, replicas: int, grace_s: float) -> bool:
        """Ask an elastic job's supervisor to stop it for a resize to `replicas`: its
        replicas get their resize signal and notice, `grace_s` to save, then the stop
        of a preemption (podium.run.resize_notice). It ends PREEMPTED."""
        order = {"replicas": replicas, "grace_s": grace_s}
        write_atomic(self.job_dir(job_id) / RESIZE_FILE, order)
        return self._signal(job_id, signal.SIGUSR1)

    def saved(self, job_id: int, step: int) -> bool:
        """A job being stopped (preempted, requeued, resized) says it finished a
        checkpoint: its supervisor stops waiting out the grace and kills what is left
        at once (SIGCHLD wakes it). False if none is alive."""
        if not self._lock_held(self.job_dir(job_id)):
            return False
        write_atomic(self.job_dir(job_id) / SAVED_FILE, {"step": step}, durable=False)
        return self._signal(job_id, signal.SIGCHLD)

    def send_signal(self, job_id: int, sig: int, scope: str) -> bool:
        """`scancel --signal`: have the job's supervisor send `sig` to `scope` (see
        podium.run.job_signals); SIGCHLD wakes it. False if none is alive."""
        if not self._lock_held(self.job_dir(job_id)):
            return False
        job_signals.send(self.job_dir(job_id), sig, scope)
        return self._signal(job_id, signal.SIGCHLD)

    def set_time_limit(self, job_id: int, seconds: int | None) -> None:
        """Give a running job's supervisor a new time limit (seconds from its start;
        None: none). It reads LIMIT_FILE within a second."""
        write_atomic(self.job_dir(job_id) / LIMIT_FILE, {"time_limit_s": seconds})

    def fail(self, job_id: int, reason: str, gpu: int | None, replace: bool = False) -> bool:
        """Tell the job's supervisor its hardware failed (SIGUSR2): its processes are
        killed at once and it ends NODE_FAIL. The reason and the bad GPU are kept in
        the job directory (`fault_note`), so a restarted daemon still knows them. With
        `replace` (a job holding spares), the supervisor first tries to give the
        failed replica's place to a spare, the other replicas running on
        (podium.run.replica_faults); it ends NODE_FAIL only when it cannot."""
        order = {"reason": reason, "gpu": gpu, "replace": replace}
        write_atomic(self.job_dir(job_id) / FAULT_FILE, order)
        return self._signal(job_id, signal.SIGUSR2)

    def add_spares(self, job_id: int, spares: list[list[int]]) -> bool:
        """Give a running job's supervisor new spares (each a replica's GPUs), after
        the daemon refilled its pool (podium.server.spare_refill). False if none is alive."""
        if not self._lock_held(self.job_dir(job_id)):
            return False
        path = self.job_dir(job_id) / SPARE_ORDERS
        data = read_json_safely(path)  # a list (read_json reads objects only)
        given: list[Any] = data if isinstance(data, list) else []
        given.append({"seq": len(given) + 1, "gpus": spares})
        write_atomic(path, given, durable=False)
        return self._signal(job_id, signal.SIGCHLD)

    def rank_seconds(self, job_id: int, world: int | None) -> dict[int, tuple[float, float]]:
        """Each rank's step and what it said its last step took outside the collectives
        (podium.run.rank_beats, ranks 0..world-1; empty for a job whose ranks say
        nothing)."""
        return read_step_seconds(self.job_dir(job_id) / RANKS_DIR, world)

    def replacements(self, job_id: int) -> list[dict[str, Any]]:
        """The replicas the job's supervisor replaced from spares so far, oldest first."""
        return read_replacements(self.job_dir(job_id))

    def dropped_spares(self, job_id: int) -> list[int]:
        """The GPUs of spares the job's supervisor dropped for a fault on them."""
        return read_dropped_spares(self.job_dir(job_id))

    def fault_note(self, job_id: int) -> tuple[str, int | None] | None:
        """What `fail` recorded for the job, if anything."""
        data = read_json(self.job_dir(job_id) / FAULT_FILE)
        if data is None:
            return None
        return str(data["reason"]), data.get("gpu")

    def _signal(self, job_id: int, sig: int) -> bool:
        if not self._lock_held(self.job_dir(job_id)):
            return False
        started = read_json(self.job_dir(job_id) / STARTED_FILE)
        if started is not None:
            pid = int(started["pid"])
        elif self._pids.get(job_id):
            pid = self._pids[job_id]  # still starting: the signal waits, blocked, for it
        else:
            return False
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True


__all__ = ["SupervisorOrders"]
