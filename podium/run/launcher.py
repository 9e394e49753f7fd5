"""The daemon's side of the warm supervisor launcher (podium.run.forkserver).

`Launcher.start` hands a job's lock and log descriptors to the fork server and returns
the forked supervisor's pid. The server is started on first use (or by `warm_up`) in
a session of its own, so a signal to the daemon's group does not reach it; it exits
when the daemon closes its end of the socket (`close`, or the daemon's death).

When the server is gone or stops answering, `start` raises LauncherLost and forgets
it (it is killed and waited for, so it forks nothing later); the next start brings up
a new one. The caller then finds out from the job's lock whether the supervisor was
forked before the server went, and otherwise starts it another way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import threading
from pathlib import Path

from podium.run.forkserver import SERVER_MAIN, SUPERVISOR_NAME, request

log = logging.getLogger("podium.launcher")

REPLY_TIMEOUT_S = 10.0


class LauncherLost(Exception):
    """The fork server died, or did not answer in time, before answering a start."""


class Launcher:
    """One fork server for the daemon's jobs under `jobs_dir` (`python` runs it)."""

    def __init__(self, jobs_dir: Path, python: str) -> None:
        self.jobs_dir = jobs_dir
        self.python = python
        self._lock = threading.Lock()  # one request at a time, one server at a time
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None

    @property
    def pid(self) -> int | None:
        """The running server's pid (None when there is none)."""
        return self._proc.pid if self._proc is not None else None

    def warm_up(self) -> None:
        """Start the server now rather than at the first job."""
        with self._lock:
            self._ensure()

    def start(self, job_dir: Path, lock_fd: int, log_fd: int) -> int:
        """The pid of a supervisor forked for `job_dir` with these descriptors.

        Raises LauncherLost when the server could not be started, died, or did not
        answer within REPLY_TIMEOUT_S (it is then stopped for good)."""
        with self._lock:
            try:
                sock = self._ensure()
                return request(sock, str(job_dir), lock_fd, log_fd)
            except (OSError, ValueError, RuntimeError) as exc:
                self._drop()
                raise LauncherLost(str(exc) or type(exc).__name__) from None

    def close(self) -> None:
        """Let the server go (it exits when its socket closes) and wait for it."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None

    def _ensure(self) -> socket.socket:
        if self._sock is not None and self._proc is not None and self._proc.poll() is None:
            return self._sock
        self._drop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            log_fd = os.open(
                self.jobs_dir / "launcher.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
            )
            try:
                self._proc = subprocess.Popen(
                    [
                        self.python,
                        "-c",
                        SERVER_MAIN,
                        SUPERVISOR_NAME,
                        str(self.jobs_dir),
                        str(theirs.fileno()),
                    ],
                    pass_fds=(theirs.fileno(),),
                    start_new_session=True,
                    stdin=subprocess.DEVNULL,
                    stdout=log_fd,
                    stderr=log_fd,
                    cwd="/",
                )
            finally:
                os.close(log_fd)
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(REPLY_TIMEOUT_S)
        self._sock = ours
        log.info("supervisor launcher started (pid %s)", self._proc.pid)
        return ours

    def _drop(self) -> None:
        """Forget the server, making sure it is dead first (it must fork nothing after
        the caller has decided what happened to a start)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            self._proc.wait()
            self._proc = None


__all__ = ["Launcher", "LauncherLost"]
