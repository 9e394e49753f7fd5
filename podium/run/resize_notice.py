"""An elastic job's resize notice (PODIUM_RESIZE_FILE): the file through which the
supervisor tells every replica that a resize is coming, and the job answers.

Standard library only (the supervisor imports it at every job start).

Contract with the job:
- The file exists, empty, from the job's start, owned by the job's user.
- Before a resize, each replica gets the job's resize signal (--resize-signal, default
  SIGUSR1) and the file holds one JSON line: {"replicas": NEW_SIZE, "deadline": EPOCH,
  "resize_count": N}. A job that cannot take signals may poll the file instead.
- The job saves its checkpoint and exits (0), or writes `ack` into the file: then it
  is stopped at once. What is still running at the deadline is stopped all the same
  (SIGTERM, the kill wait, SIGKILL). Then Podium starts it again at the new size.
"""

from __future__ import annotations

import json
import os


def own_file(path: str, creds: tuple[int, int] | None) -> None:
    """Create `path` empty (mode 0600), owned by `creds` (uid, gid) when given."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        if creds is not None:
            os.fchown(fd, creds[0], creds[1])
    finally:
        os.close(fd)


def write_notice(path: str, replicas: int, deadline: float, resize_count: int) -> None:
    """Tell the job its new size and deadline (nothing when the file is gone or odd:
    the signal still tells it)."""
    tell(path, {"replicas": replicas, "deadline": deadline, "resize_count": resize_count})


def acknowledged(path: str) -> bool:
    """Whether the job wrote `ack` into its notice (64 bytes read at most)."""
    return read_notice(path, 64).strip().lower() == "ack"


def tell(path: str, message: dict[str, object]) -> None:
    """Write `message` as the one JSON line of a notice the job's user owns, in place
    (never through a link, never waiting on a FIFO; nothing when it is gone or odd)."""
    line = (json.dumps(message) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        os.write(fd, line)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_notice(path: str, limit: int) -> str:
    """What the job left in a notice it owns: `limit` bytes at most, never through a
    link or waiting on a FIFO; "" when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        return os.read(fd, limit).decode(errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
