"""The files between the daemon and a supervisor, and how they are written.

Standard library only (json, os): the supervisor imports this at every job start.
Files are written atomically (temp file, fsync, rename), so a reader sees either
nothing or the whole file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from pathlib import Path
from typing import Any

PLAN_FILE = "launch.json"
STARTED_FILE = "started.json"
RESULT_FILE = "result.json"
TASKS_FILE = "tasks.json"  # pid of each task, by rank, once all have started
FAULT_FILE = "fault.json"  # why the daemon stopped the job for a hardware fault
LIMIT_FILE = "limit.json"  # a new time limit (scontrol update), read while the job runs
REQUEUE_FILE = "requeue.json"  # the stop is a requeue asked for (SIGTERM, not --signal)
HEARTBEAT_FILE = "heartbeat"  # the job touches it (PODIUM_HEARTBEAT_FILE)
RESIZE_FILE = "resize.json"  # the daemon's order to resize an elastic job (root's)
SAVED_FILE = "saved.json"  # a job being stopped said it checkpointed: stop it at once
RESIZE_NOTICE = "resize"  # what the job reads of it, and acknowledges (PODIUM_RESIZE_FILE)
CONTAINMENT_FILE = "containment.json"  # cgroups, written apart by supervisors before 2026-11
LOCK_FILE = "lock"
SCRIPT_FILE = "script"
SUPERVISOR_LOG = "supervisor.log"


def write_atomic(path: Path, data: Any, *, durable: bool = True, mode: int = 0o600) -> None:
    """Write `data` as JSON to `path` so readers see all of it or nothing.

    The file is created with `mode` (owner-only by default). With `durable`, the data
    is on disk (fsync) before the file appears, so it also survives a power loss;
    without it, only a process crash.
    """
    text = json.dumps(data).encode()  # dumps, not dump: the C encoder (~10x faster)
    tmp = f"{path.parent}/.{path.name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        try:
            write_all(fd, text)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)  # a half-written file must not hold space on a full disk
        raise


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd` (os.write may write less than asked)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_bounded(path: str | Path, limit: int) -> bytes | None:
    """The bytes of `path` when it is a regular file of at most `limit` bytes, read
    without following a link or waiting on a FIFO (what a user left in a directory of
    theirs that root reads); None when it is missing or anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return os.read(fd, limit + 1)[:limit]
    except OSError:
        return None
    finally:
        os.close(fd)


def read_json_safely(path: Path, limit: int = 1 << 20) -> Any:
    """The JSON at `path`, read as `read_bounded` reads; None when it is missing,
    anything but a regular file of at most `limit` bytes, or not JSON."""
    data = read_bounded(path, limit)
    try:
        return None if data is None else json.loads(data)
    except ValueError:
        return None


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at `path`, or None when it does not exist."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None
