"""A run's end, told to the daemon at once: a named pipe in the jobs directory.

A supervisor that has recorded its result and let go of the job's lock writes one
byte to JOBS_DIR/.ended (`notify_ended`); the daemon reads that pipe on a thread of
its own (`watch_ended`) and collects ended runs straight away, instead of at its next
`scheduler_interval_s` tick. A job's CPUs and GPUs come back as soon as it is over,
which is what bounds how many short jobs a node turns over per second.

Only a hint: a missed byte (no daemon reading, a full pipe) costs nothing but the wait
for the next tick, and the daemon trusts nothing it reads (it polls locks and results
as always). The pipe is the daemon's (mode 0600, as root); jobs cannot reach it.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading

TYPE_CHECKING = False  # the supervisor imports this module: no typing on its path
if TYPE_CHECKING:
    from collections.abc import Callable

END_FIFO = ".ended"


def notify_ended(jobs_dir: str) -> None:
    """Tell a daemon reading JOBS_DIR/.ended that a run is over (never blocks, never
    raises: no reader, no pipe or a full pipe are all fine)."""
    path = os.path.join(jobs_dir, END_FIFO)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b".")
        finally:
            os.close(fd)


def watch_ended(jobs_dir: str, on_end: Callable[[], None]) -> threading.Thread:
    """Make JOBS_DIR/.ended (a fresh pipe, 0600) and call `on_end` from a daemon thread
    each time supervisors write to it."""
    path = os.path.join(jobs_dir, END_FIFO)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    os.mkfifo(path, 0o600)
    # Read and write: the pipe then never reads as closed, and opening never blocks.
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)

    def run() -> None:
        while True:
            try:
                if not os.read(fd, 4096):
                    return
            except OSError:
                return
            on_end()

    thread = threading.Thread(target=run, name="podium-ended", daemon=True)
    thread.start()
    return thread


__all__ = ["END_FIFO", "notify_ended", "watch_ended"]
