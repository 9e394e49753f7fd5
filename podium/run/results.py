"""The supervisor's record of a job's end: the result, written whatever the disk does
(a reserve, then retries on a full disk).
Stdlib only: the supervisor imports it at every job start."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from podium.run.files import RESULT_FILE, write_all, write_atomic


def result_record(
    state: str,
    exit_code: int | None,
    signal_num: int | None,
    start: float,
    *,
    reason: str = "None",
    tasks: list[dict[str, Any]] | None = None,
    leftover: int = 0,
    fault: str | None = None,
    steps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The JSON of a JobResult (see podium.run.plan.JobResult)."""
    return {
        "steps": steps or [],
        "fault": fault,
        "state": state,
        "exit_code": exit_code,
        "signal": signal_num,
        "start_time": start,
        "end_time": time.time(),
        "reason": reason,
        "tasks": tasks or [],
        "leftover_killed": leftover,
    }


RESULT_RESERVE = "result.reserve"
RESULT_RESERVE_BYTES = 64 << 10


def keep_result_room(job_dir: Path) -> None:
    """Hold a little space in the job directory for result.json (best effort): the
    reserve is the file the result is later written into."""
    with contextlib.suppress(OSError):
        fd = os.open(job_dir / RESULT_RESERVE, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.posix_fallocate(fd, 0, RESULT_RESERVE_BYTES)
        finally:
            os.close(fd)


def _write_into_reserve(job_dir: Path, text: bytes) -> bool:
    """Write the result into the reserve and rename it to result.json (one file made
    per job, not two; the space is already held). False: no reserve, or it was too
    small; the caller writes the file anew."""
    reserve = job_dir / RESULT_RESERVE
    try:
        fd = os.open(reserve, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if len(text) > RESULT_RESERVE_BYTES:
            return False
        write_all(fd, text)
        os.ftruncate(fd, len(text))
        os.fsync(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    os.replace(reserve, job_dir / RESULT_FILE)
    return True


def record_result(job_dir: Path, result: dict[str, Any]) -> None:
    """Write result.json durably, whatever the disk does: into the reserve taken at
    start when it holds it; else as a new file, and on a full disk the reserve is
    given back first, after which the write is retried (the lock stays held, so the
    daemon sees the job running, never vanished) until it succeeds. Errors other
    than a full disk or quota are raised."""
    if _write_into_reserve(job_dir, json.dumps(result).encode()):
        return
    delay = 0.2
    while True:
        try:
            write_atomic(job_dir / RESULT_FILE, result)
            break
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            try:
                os.unlink(job_dir / RESULT_RESERVE)
                continue  # room made: try again at once
            except FileNotFoundError:
                pass
            with contextlib.suppress(OSError):
                print(f"cannot write the result ({exc.strerror}); retrying", file=sys.stderr)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(job_dir / RESULT_RESERVE)
