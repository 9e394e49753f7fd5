"""A step's processes and their files: starting a task (fork and exec, no subprocess
module: srun's start-up is on every step's path), where its output goes (--output,
--error with %t, %s, %J expanded) and the --label relays. Standard library only."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing`'s: importing it costs srun's start-up ~5 ms
if TYPE_CHECKING:
    import signal
    import threading
    from typing import Any

    from podium.jobsteps.srun_options import StepOptions
else:  # the C module: `signal` imports enum, ~7 ms of srun's start-up here
    import _signal as signal

# Signals a task must start with at their defaults (Python ignores SIGPIPE itself).
RESET = (signal.SIGPIPE, signal.SIGTTOU, signal.SIGTTIN, signal.SIGXFSZ)


def spawn(
    argv: list[str],
    env: dict[str, str],
    cwd: str | None,
    stdio: list[int],
    pgid: int,
    container: dict[str, Any] | None = None,
    rank: int = 0,
) -> int:
    """Start `argv` (found on env's PATH) in process group `pgid` (0: its own) with
    `stdio` as its fds 0-2; return its pid. With `container` (podium.run.containers.lifecycle),
    in it, as task `rank` (`cwd` is then the container's workdir). Raises OSError if
    it could not start."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the task
        try:
            os.setpgid(0, pgid)
            for sig in RESET:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            for target, fd in enumerate(stdio):
                if fd != target:
                    os.dup2(fd, target)
            if container is not None:
                from podium.run.containers.lifecycle import enter

                env, rc = enter(container, rank, env)
                if rc:
                    argv = ["/bin/sh", rc, *argv]
            elif cwd:
                os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(write_end, f"{exc.errno}:{exc.strerror}".encode())
        except Exception as exc:  # the container could not be made: its reason
            os.write(write_end, f"0:{exc}".encode())
        os._exit(127)
    os.close(write_end)
    try:  # noqa: SIM105 (contextlib costs srun's start-up ~7 ms)
        os.setpgid(pid, pgid or pid)  # also here, so no signal to the group misses it
    except OSError:
        pass
    failure = os.read(read_end, 4096)
    os.close(read_end)
    if failure:
        os.waitpid(pid, 0)
        errno, _, text = failure.decode().partition(":")
        raise OSError(int(errno), text, argv[0])
    return pid


class Output:
    """Where each task's stdout and stderr go, and the relays --label needs."""

    def __init__(self, opts: StepOptions, names: dict[str, object], step_id: int) -> None:
        self.opts, self.names, self.step_id = opts, names, step_id
        self.files: dict[str, int] = {}
        self.pipes: list[int] = []  # the task's ends, closed here once it started
        self.relays: list[threading.Thread] = []
        self.width = 1
        self.lock: threading.Lock | None = None

    def _file(self, pattern: str, rank: int) -> int:
        from podium.run.patterns import expand  # re: only when a pattern is given

        n = self.names
        path = expand(
            pattern.replace("%s", str(self.step_id)).replace("%J", f"%j.{self.step_id}"),
            job_id=int(str(n["job_id"])),
            name=str(n["name"]),
            user=str(n["user"]),
            node=str(n["node"]),
            array_job_id=n["array_job_id"],  # type: ignore[arg-type]
            array_task_id=n["array_task_id"],  # type: ignore[arg-type]
            task_id=rank,
        )
        if path not in self.files:
            mode = os.O_APPEND if self.opts.open_mode == "append" else os.O_TRUNC
            self.files[path] = os.open(path, os.O_WRONLY | os.O_CREAT | mode | os.O_CLOEXEC, 0o666)
        return self.files[path]

    def stdio(self, rank: int, stdin: int) -> list[int]:
        """fds 0-2 for task `rank`: its input, then a file, a pipe to relay (--label)
        or ours, for output and errors."""
        out = self._file(self.opts.output, rank) if self.opts.output else None
        err = self._file(self.opts.error, rank) if self.opts.error else out
        if not self.opts.label:
            return [stdin, 1 if out is None else out, 2 if err is None else err]
        ends = []
        for fd, sink in ((out, 1), (err, 2)):
            if fd is not None:
                ends.append(fd)
                continue
            read_end, write_end = os.pipe2(os.O_CLOEXEC)
            self._relay(read_end, sink, rank)
            self.pipes.append(write_end)
            ends.append(write_end)
        return [stdin, *ends]

    def started(self) -> None:
        """The task holds its pipe ends now; ours are closed so EOF can come."""
        for fd in self.pipes:
            os.close(fd)
        self.pipes.clear()

    def _relay(self, read_end: int, sink: int, rank: int) -> None:
        import threading  # only --label needs threads

        if self.lock is None:
            self.lock = threading.Lock()
        prefix = f"{rank:>{self.width}}: ".encode()
        thread = threading.Thread(target=self._copy, args=(read_end, sink, prefix), daemon=True)
        thread.start()
        self.relays.append(thread)

    def _copy(self, read_end: int, sink: int, prefix: bytes) -> None:
        assert self.lock is not None
        pending = b""
        while True:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                with self.lock:
                    _write_all(sink, b"".join(prefix + line + b"\n" for line in lines))
        if pending:
            with self.lock:
                _write_all(sink, prefix + pending + b"\n")
        os.close(read_end)

    def close(self) -> None:
        self.started()
        for thread in self.relays:
            thread.join()
        for fd in self.files.values():
            os.close(fd)
        sys.stdout.flush()


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
