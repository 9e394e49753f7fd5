"""A job that could not start, told where its user looks, as slurmstepd does.

Contract:
- `failure_of(exc)` turns what stopped a launch (the task's exec, its files, its
  container, its identity, its cgroup) into the job's reason ("launch failed: ...",
  which Slurm's listings show as JobLaunchFailure: podium.api.slurm_reasons) and a
  non-zero exit code: the errno of a failed system call, as slurmstepd exits with
  execve's errno, else 1.
- `tell_user(path, line, who)` appends `line` to the job's standard error file (the
  first task's; its output file when errors go there), opened as the job's user in a
  child of its own: it is never created or written as anyone else, and a file system
  that hangs holds that child alone (given up after TELL_TIMEOUT_S). A file the user
  cannot open (the very failure, sometimes) is left alone; nothing is raised.

Standard library only (the supervisor imports it).
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from podium.api.slurm_reasons import LAUNCH_FAILED
from podium.run.identity import Identity
from podium.run.job_files import open_job_file
from podium.run.stopping import ChildError, Stopped, call_in_child

LAUNCH_EXIT = 1  # the exit code of a launch that failed other than in a system call
TELL_TIMEOUT_S = 5.0


class LaunchFailure(NamedTuple):
    """Why a job never ran (its reason) and the exit code it ends with."""

    reason: str
    exit_code: int


def failure_of(exc: BaseException) -> LaunchFailure:
    """The failure `exc` means (see the module's contract)."""
    code = getattr(exc, "exit_code", None)
    if isinstance(exc, OSError):
        what = f"{exc.strerror}: {exc.filename}" if exc.filename else str(exc.strerror or exc)
        return LaunchFailure(f"{LAUNCH_FAILED}: {what}", exc.errno or LAUNCH_EXIT)
    text = str(exc) or type(exc).__name__
    if not isinstance(code, int) or code <= 0:
        code = LAUNCH_EXIT
    return LaunchFailure(f"{LAUNCH_FAILED}: {text}", code)


def tell_user(path: str, line: str, who: Identity) -> bool:
    """Append `line` (one line) to file `path` as `who`, in a child that takes the
    user's identity (podium.run.stopping.call_in_child: given up after TELL_TIMEOUT_S,
    or when the job is stopped meanwhile); True when it was written."""
    data = (line.rstrip("\n") + "\n").encode(errors="replace")

    def append() -> bool:
        if who.is_switch_needed:
            os.setgroups(list(who.groups))
            os.setgid(who.gid)
            os.setuid(who.uid)
        os.umask(who.umask)
        fd = open_job_file(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, data)
        return True

    try:
        return bool(call_in_child(append, time.time() + TELL_TIMEOUT_S))
    except (ChildError, Stopped):
        return False


__all__ = ["LAUNCH_EXIT", "TELL_TIMEOUT_S", "LaunchFailure", "failure_of", "tell_user"]
