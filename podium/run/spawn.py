"""Start one task: fork, enter the job's process group, drop to the user, exec."""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from podium.run.job_files import JobFileError, TaskFiles, open_task_files
from podium.run.stopping import wait_readable


class SpawnError(Exception):
    """The task could not be started (exec failed, bad directory, ...)."""


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
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for sig in (
                signal.SIGTERM,
                signal.SIGINT,
                signal.SIGHUP,
                signal.SIGCHLD,
                signal.SIGUSR1,
                signal.SIGUSR2,
                signal.SIGPIPE,
            ):
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
            if container is not None:
                from podium.run.containers.lifecycle import enter

                program = os.open(argv[0], os.O_RDONLY)
                os.set_inheritable(program, True)  # a script's interpreter reads it by /dev/fd
                env, rc = enter(container, procid, env)
                os.closerange(3, min(write_end, program))
                os.closerange(max(write_end, program) + 1, 65536)
                os.closerange(min(write_end, program) + 1, max(write_end, program))
                if rc:
                    os.execve("/bin/sh", ["sh", rc, f"/proc/self/fd/{program}", *argv[1:]], env)
                os.execve(program, argv, env)
            os.chdir(cwd)
            os.closerange(3, write_end)
            os.closerange(write_end + 1, 65536)
            os.execve(argv[0], argv, env)
        except BaseException as exc:  # report to the parent, never return into its code
            why = str(exc) if isinstance(exc, JobFileError) else f"{type(exc).__name__}: {exc}"
            try:
                os.write(write_end, why.encode()[:4000])
            finally:
                os._exit(127)
    os.close(write_end)
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
        raise SpawnError(b"".join(chunks).decode(errors="replace"))
    return pid
