"""Start one task: fork, enter the job's process group, drop to the user, exec."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from typing import Any

from podium.run.job_files import JobFileError, TaskFiles, open_task_files
from podium.run.stopping import wait_readable


class SpawnError(Exception):
    """The task could not be started (exec failed, bad directory, ...); `exit_code`
    is the errno of the system call that failed (as slurmstepd exits with execve's),
    else 1."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def exec_failure(exc: OSError, program: str, cwd: str) -> str:
    """One line for a task's exec (or chdir) that failed with `exc`: what could not
    be run and why, and the interpreter a script's #! line names when that is what
    is missing (execve says ENOENT of the script itself)."""
    why = exc.strerror or str(exc)
    if exc.filename == cwd and exc.filename != program:
        return f"cannot enter the working directory {cwd}: {why}"
    try:
        with open(program, "rb") as fh:
            first = fh.readline(4096)
    except OSError:
        first = b""
    if first.startswith(b"#!") and exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC):
        words = first[2:].decode(errors="replace").split()
        if words:
            return f"cannot run the job's script: its #! line names {words[0]}: {why}"
    return f"cannot run {program}: {why}"


def spawn_task(
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    *,
    files: TaskFiles,
    end: float | None,
    pgid: int,
    creds: tuple[int, int, list[int]] | None,
    cgroup_procs: list[str] | None = None,
    umask: int = 0o022,
    cpu_ids: list[int] | None = None,
    container: dict[str, Any] | None = None,
    procid: int = 0,
) -> int:
    """Fork and exec `argv`; return the child's pid.

    The child gets an empty signal mask and default handlers, joins process group
    `pgid` (0: a new group led by itself), joins the cgroups whose cgroup.procs files
    are `cgroup_procs` (best effort: the supervisor also tracks descendants), is bound
    to `cpu_ids` (the cpuset enforces them where it exists), takes
    (uid, gid, groups) from `creds` when given (groups first, so nothing runs with
    the supervisor's), sets `umask`, opens its standard files as that user
    (podium.run.job_files: a FIFO or a hung file system blocks only the child), and
    closes every other descriptor. With
    `container` (from podium.run.containers.lifecycle.prepare), it then enters the container as
    the user, and `argv[0]` is opened before and run from its descriptor, so a batch
    script on the host runs inside; `cwd` is then the container's workdir.
    Raises SpawnError with the child's reason if it could not exec (a file it could
    not open among them), and podium.run.stopping.Stopped, the child killed, if the job
    was stopped or reached `end` (its time limit) before the child could exec.
    """
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read_end)
            _become_task(pgid, cgroup_procs, cpu_ids, creds, umask, files)
            if container is not None:
                _exec_in_container(argv, env, container, procid, write_end)
            os.chdir(cwd)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 65536)
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # report to the parent, never return into its code
            try:
                os.write(write_end, _child_failure(exc, argv[0], cwd))
            finally:
                os._exit(127)
    os.close(write_end)
    _wait_for_exec(read_end, pid, end)
    return pid


_DEFAULT_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGCHLD,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGPIPE,
)


def _become_task(
    pgid: int,
    cgroup_procs: list[str] | None,
    cpu_ids: list[int] | None,
    creds: tuple[int, int, list[int]] | None,
    umask: int,
    files: TaskFiles,
) -> None:
    """In the forked child: what `spawn_task` promises before the exec, in order."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in _DEFAULT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    os.setpgid(0, pgid)
    for procs in cgroup_procs or ():
        with contextlib.suppress(OSError), open(procs, "w") as fh:
            fh.write("0")
    if cpu_ids:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, cpu_ids)
    if creds is not None:
        uid, gid, groups = creds
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
    os.umask(umask)
    for fd, target in zip(open_task_files(files), (0, 1, 2), strict=True):
        os.dup2(fd, target)


def _exec_in_container(
    argv: list[str], env: dict[str, str], container: dict[str, Any], procid: int, keep: int
) -> None:
    """In the forked child, as the user: open `argv[0]` on the host, enter the
    container and run the program from its descriptor (a script's interpreter reads
    it by /dev/fd); every descriptor but the program and `keep` is closed."""
    from podium.run.containers.lifecycle import enter

    program = os.open(argv[0], os.O_RDONLY)
    os.set_inheritable(program, True)
    env, rc = enter(container, procid, env)
    os.closerange(3, min(keep, program))
    os.closerange(max(keep, program) + 1, 65536)
    os.closerange(min(keep, program) + 1, max(keep, program))
    if rc:
        os.execve("/bin/sh", ["sh", rc, f"/proc/self/fd/{program}", *argv[1:]], env)
    os.execve(program, argv, env)


def _child_failure(exc: BaseException, program: str, cwd: str) -> bytes:
    """What the child tells the parent when it could not exec: "ERRNO\\nreason"."""
    if isinstance(exc, JobFileError):
        why = str(exc)
    elif isinstance(exc, OSError) and exc.filename in (program, cwd):
        why = exec_failure(exc, program, cwd)
    else:
        why = f"{type(exc).__name__}: {exc}"
    code = exc.errno if isinstance(exc, OSError) and exc.errno else 1
    return f"{code}\n{why}".encode()[:4000]


def _wait_for_exec(read_end: int, pid: int, end: float | None) -> None:
    """Read the child's report until its exec closes the pipe: nothing means it runs;
    a report raises SpawnError (the child reaped). Stopped (from wait_readable) reaps
    it too."""
    chunks = []
    try:
        while True:
            wait_readable(read_end, pid, end)
            chunk = os.read(read_end, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:
        os.close(read_end)
        os.waitpid(pid, 0)
        raise
    os.close(read_end)
    if chunks:
        os.waitpid(pid, 0)
        errno_text, _, why = b"".join(chunks).decode(errors="replace").partition("\n")
        code = int(errno_text) if errno_text.isdigit() and int(errno_text) > 0 else 1
        raise SpawnError(why, code)
