"""The relay: an interactive allocation's batch step, which runs the client's command
on the client's terminal (podium.slurm_commands.attach says how it is handed over). Standard
library only, and light: it starts on every `srun` and `salloc` from outside a job."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import struct
import sys
import termios
import time

from podium.jobsteps.srun import run_step
from podium.jobsteps.srun_options import parse
from podium.jobsteps.step_shape import Allocation, Step, StepError, task_env
from podium.jobsteps.wire import decode, read_header, send
from podium.run.ports import free_port
from podium.run.steps import STEP_DIR_ENV, create_step, step_record, update_step

TYPE_CHECKING = False  # not `typing`'s: ~5 ms of the relay's start-up
if TYPE_CHECKING:
    import signal
    from typing import Any
else:  # the C module: `signal` imports enum
    import _signal as signal


def relay(path: str) -> int:
    """Connect to the client at `path`, take its descriptors and run its command: a
    step (podium.jobsteps.srun) or, with a pty, the command on a new terminal."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while not data.endswith(b"\0\n"):
        more = conn.recv(1 << 20)
        if not more:
            return 1
        data += more
    args, pty, step, winsize = read_header(data)
    if len(fds) != 3:
        return 1
    try:
        run_pty = _run_on_pty  # a command on its own terminal, or a step on the client's
        code = run_pty(conn, args, step, winsize, fds) if pty else _run_step(conn, args, fds)
    except (ValueError, StepError, OSError) as exc:
        os.write(fds[2], f"srun: error: {exc}\n".encode())
        code = 1
    with contextlib.suppress(OSError):
        send(conn, {"exit": code})
    return code


def _controls(conn: socket.socket) -> list[dict[str, Any]]:
    """The client's messages waiting on `conn` (signals, window sizes)."""
    data = b""
    with contextlib.suppress(BlockingIOError):
        data = conn.recv(65536, socket.MSG_DONTWAIT)
    return [m for m in map(decode, data.splitlines()) if m is not None]


def _run_step(conn: socket.socket, args: list[str], fds: list[int]) -> int:
    """The command as step 0 on the client's own descriptors; the client's signals
    are raised here, where srun passes them on to its tasks."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    opts = parse(args)
    opts.pty = False

    def listen() -> None:
        while True:
            select.select([conn], [], [])
            chunk = conn.recv(65536, socket.MSG_PEEK)
            if not chunk:
                return
            for message in _controls(conn):
                if "signal" in message:
                    with contextlib.suppress(OSError, ValueError):
                        os.kill(os.getpid(), int(message["signal"]))

    import threading

    threading.Thread(target=listen, daemon=True).start()
    return run_step(opts, dict(os.environ))


def _run_on_pty(
    conn: socket.socket, argv: list[str], as_step: bool, winsize: list[int], fds: list[int]
) -> int:
    """The command alone on a new pseudo-terminal, bytes copied between it and the
    client's terminal until it exits. As srun's, it is step 0 (recorded, with the
    step's variables); as salloc's, it has the allocation's environment."""
    env = dict(os.environ)
    alloc = Allocation(env)
    step = Step(parse(["-n", "1", *argv]), alloc)
    step_dir = env[STEP_DIR_ENV] if as_step and STEP_DIR_ENV in env else None
    record = step_record(
        0, name=os.path.basename(argv[0]), ntasks=1, node=alloc.node, gpus=step.gpus,
        pgid=None, start=time.time(),
    )  # fmt: skip
    if step_dir is not None:
        record["step_id"] = create_step(step_dir, record)
        env = task_env(env, alloc, step, record["step_id"], 0, free_port())
    master, slave = os.openpty()
    _set_winsize(slave, winsize)
    pid = os.fork()
    if pid == 0:  # the command: its own session, the pty its controlling terminal
        try:
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for target in (0, 1, 2):
                os.dup2(slave, target)
            os.closerange(3, 65536)
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(2, f"srun: error: cannot run {argv[0]}: {exc.strerror}\r\n".encode())
        os._exit(127)
    os.close(slave)
    record.update(pgid=pid, pids=[pid])
    if step_dir is not None:
        update_step(step_dir, record)
    status = _copy_until_exit(conn, master, fds, pid)
    code = os.waitstatus_to_exitcode(status)
    if step_dir is not None:
        exit_code, sig = (code, None) if code >= 0 else (0, -code)
        state = "COMPLETED" if code == 0 else "FAILED"
        record.update(state=state, exit_code=exit_code, signal=sig, end_time=time.time())
        update_step(step_dir, record)
    return code if code >= 0 else 128 - code


def _set_winsize(fd: int, size: Any) -> None:
    if isinstance(size, list) and len(size) == 4 and all(isinstance(v, int) for v in size):
        with contextlib.suppress(OSError, struct.error):
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", *size))


def _copy_until_exit(conn: socket.socket, master: int, fds: list[int], pid: int) -> int:
    """Copy the client's input to the pty and the pty's output to the client until
    the command has exited and its output is drained; its wait status."""
    user_in, user_out = fds[0], fds[1]
    status: int | None = None
    sources = [master, user_in, conn.fileno()]
    while True:
        if status is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
        ready, _, _ = select.select(sources, [], [], 0.05)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                data = b""
            if not data:
                sources.remove(master)
            else:
                os.write(user_out, data)
        elif status is not None and master in sources and not ready:
            sources.remove(master)  # exited and drained
        if user_in in ready:
            data = os.read(user_in, 65536)
            if data:
                os.write(master, data)
            else:
                sources.remove(user_in)
        if conn.fileno() in ready:
            messages = _controls(conn)
            if not messages:
                sources.remove(conn.fileno())
            for message in messages:
                if "winsize" in message:
                    _set_winsize(master, message["winsize"])
                    with contextlib.suppress(OSError):
                        os.killpg(pid, signal.SIGWINCH)
        if status is not None and master not in sources:
            os.close(master)
            return status


def main(argv: list[str]) -> int:
    """`python -m podium.slurm_commands attach SOCKET`: the relay, as a job's batch step."""
    if len(argv) != 1:
        print("podium.slurm_commands attach: expected the client's socket path", file=sys.stderr)
        return 2
    return relay(argv[0])
