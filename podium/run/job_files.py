"""A task's standard input, output and error, opened by the task's own child as its user.

Standard library only (the supervisor imports it at every job start).

Contract:
- `open_task_files` runs in the child that becomes the task, after it took the user's
  whole identity (uid, gid, groups, umask), so every permission is judged as the user's
  and a file that blocks its open (a FIFO, a hung file system) blocks only that child,
  which the supervisor kills on cancel or at the time limit (podium.run.stopping).
- Files are opened without blocking and never through a final symbolic link; what is
  opened must be a regular file, a terminal, or one of the character devices that
  behave as files do for a job's output (/dev/null, /dev/zero, /dev/full, /dev/random,
  /dev/urandom). Anything else (a FIFO, a socket, a directory, a block device, another
  device) raises JobFileError naming the path and what would be right.
- An output file whose directory is missing, where the user could make that directory,
  is waited for up to OUTPUT_DIR_WAIT_S: clients make a job's log directory once
  sbatch has printed its id (submitit's `logs/%j/`), and Slurm's slower launch lets
  them win that race. The wait costs nothing when the directory is there; a directory
  that never comes fails the job as before, with the same one line.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import TYPE_CHECKING, NamedTuple

from podium.run.identity import JOB_FILES
from podium.run.patterns import expand

if TYPE_CHECKING:
    from podium.run.plan import LaunchPlan, TaskPlan

# (major, minor) of the memory devices a job may read or write as plain files.
MEMORY_DEVICES = {
    (1, 3): "null", (1, 5): "zero", (1, 7): "full", (1, 8): "random", (1, 9): "urandom",
}  # fmt: skip


OUTPUT_DIR_WAIT_S = 10.0  # how long a missing output directory the user could make is awaited


class JobFileError(Exception):
    """A task's input or output file cannot be used; the message says why."""


class TaskFiles(NamedTuple):
    """The absolute paths of a task's files: `stdin` (None: /dev/null), `stdout`,
    `stderr` (None: with stdout); `append`: outputs are not truncated when opened
    (O_TRUNC otherwise; they are always written O_APPEND)."""

    stdin: str | None
    stdout: str
    stderr: str | None
    append: bool


def task_files(plan: LaunchPlan, task: TaskPlan) -> TaskFiles:
    """Task `task`'s files: the plan's patterns (%j, %x, %t, ...) expanded, relative
    to the job's working directory."""

    def path_for(pattern: str) -> str:
        p = expand(
            pattern,
            job_id=plan.job_id,
            name=plan.name,
            user=plan.user,
            node=plan.node,
            array_job_id=plan.array_job_id,
            array_task_id=plan.array_task_id,
            task_id=task.procid,
        )
        return os.path.join(plan.work_dir, p)

    return TaskFiles(
        stdin=path_for(plan.stdin) if plan.stdin is not None else None,
        stdout=path_for(plan.stdout),
        stderr=path_for(plan.stderr) if plan.stderr is not None else None,
        append=plan.open_mode == "append",
    )


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a device"


def open_job_file(path: str, flags: int) -> int:
    """Open `path` with `flags` (plus O_NONBLOCK while opening, O_NOFOLLOW, O_NOCTTY,
    O_CLOEXEC) and return a blocking descriptor; raise JobFileError unless it is a
    regular file, a terminal or a memory device (see the module's contract)."""
    try:
        fd = os.open(
            path, flags | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC, 0o666
        )
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader, a socket
            raise JobFileError(f"{path} is a FIFO or a socket: {JOB_FILES}") from None
        if exc.errno == errno.ELOOP:
            raise JobFileError(f"{path} is a symbolic link: name the file itself") from None
        raise JobFileError(f"{path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        mode = info.st_mode
        if not (
            stat.S_ISREG(mode)
            or (
                stat.S_ISCHR(mode)
                and ((os.major(info.st_rdev), os.minor(info.st_rdev)) in MEMORY_DEVICES
                     or os.isatty(fd))
            )
        ):  # fmt: skip
            raise JobFileError(f"{path} is {_kind(mode)}: {JOB_FILES}")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _could_be_made(directory: str) -> bool:
    """Whether the caller could make `directory`: its nearest existing ancestor is a
    directory it may write and search."""
    parent = directory
    while True:
        try:
            info = os.stat(parent)
        except FileNotFoundError:
            up = os.path.dirname(parent)
            if up == parent:
                return False
            parent = up
            continue
        except OSError:
            return False
        return stat.S_ISDIR(info.st_mode) and os.access(parent, os.W_OK | os.X_OK)


def open_output(path: str, flags: int, wait_s: float = OUTPUT_DIR_WAIT_S) -> int:
    """`open_job_file` for an output: when its directory is missing but the caller
    could make it, wait up to `wait_s` for it to appear (see the module's contract)."""
    directory = os.path.dirname(path) or "."
    if os.path.isdir(directory) or not _could_be_made(directory):
        return open_job_file(path, flags)
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while not os.path.isdir(directory) and time.monotonic() < deadline:
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    return open_job_file(path, flags)


def open_task_files(files: TaskFiles) -> tuple[int, int, int]:
    """(stdin, stdout, stderr) descriptors for `files`, opened by the calling process
    (the task's child, already the user). Raises JobFileError."""
    # Always O_APPEND: the replicas of an elastic job (and its spares' standbys) share
    # one file unless %t tells them apart, and with their own offsets each would write
    # over the others' lines. Only the first opening truncates (`append` False).
    out_flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | (0 if files.append else os.O_TRUNC)
    stdin = (
        open_job_file(files.stdin, os.O_RDONLY)
        if files.stdin is not None
        else os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    )
    stdout = open_output(files.stdout, out_flags)
    stderr = stdout
    if files.stderr is not None and files.stderr != files.stdout:
        stderr = open_output(files.stderr, out_flags)
    return stdin, stdout, stderr


__all__ = [
    "MEMORY_DEVICES",
    "OUTPUT_DIR_WAIT_S",
    "JobFileError",
    "TaskFiles",
    "open_job_file",
    "open_output",
    "open_task_files",
    "task_files",
]
