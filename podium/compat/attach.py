"""Interactive allocations: `srun` and `salloc` outside a job, on the user's terminal.

As Slurm does it, the command runs inside the allocation, not on the submitting
host: here, as the batch step of a job, so the job's supervisor owns it (its cgroups,
limits, user and cleanup), and the user's terminal is wired to it.

1. The client makes a private directory (mode 0700) with a listening Unix socket and
   submits a job whose batch script runs `podium.compat attach SOCKET` (the relay).
   While the job waits, Slurm's messages are printed ("job N queued and waiting for
   resources"); Ctrl-C cancels it ("Job allocation N has been revoked").
2. The relay, running as the job, connects; the client checks the peer is its own
   user (SO_PEERCRED) and sends its srun arguments with its stdin, stdout and stderr
   (SCM_RIGHTS).
3. Without `--pty`, the relay runs the command as step 0 (podium.compat.srun) with
   those descriptors: output reaches the user's terminal or pipe directly. With
   `--pty` (and for salloc), it runs the command on a new pseudo-terminal in its own
   session and copies bytes both ways; the client's terminal is raw meanwhile, so
   Ctrl-C reaches the job's foreground process as it would in a local shell. Window
   size changes follow.
4. The relay sends the exit code; the job ends with it, which ends the allocation.
   Signals the client gets (INT, TERM, HUP; without a pty) are passed on to the step.

Standard library only on the relay's side.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import signal
import socket
import struct
import sys
import termios
import time
from typing import Any

from podium.compat.srun import Allocation, Step, StepError, free_port, run_step, task_env
from podium.compat.step_options import StepOptions, parse
from podium.run.steps import STEP_DIR_ENV, create_step, step_record, update_step

# srun options that shape the allocation; they go to the job as sbatch options.
JOB_OPTIONS = frozenset(
    {"--ntasks", "--nodes", "--ntasks-per-node", "--cpus-per-task", "--gpus-per-task"}
    | {"--gpus", "--job-name", "--chdir", "--partition", "--account", "--qos", "--time"}
    | {"--mem", "--mem-per-cpu", "--mem-per-gpu", "--gres", "--nodelist", "--exclude"}
    | {"--constraint", "--time-min", "--comment", "--gpus-per-node", "--cpus-per-gpu"}
    | {"--exclusive", "--signal"}
)
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"}
TERMINAL_STATES |= {"OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


# -- the client (outside a job) -------------------------------------------------------


def _winsize(fd: int) -> list[int]:
    try:
        rows, cols, x, y = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        return [rows, cols, x, y]
    except OSError:
        return [24, 80, 0, 0]


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def allocate_and_run(tool: str, args: list[str]) -> int:
    """`srun ARGS` or `salloc ARGS` outside a job: an allocation, then the command on
    this terminal. Returns the command's exit code (1 if it never ran)."""
    if tool == "salloc":
        opts = parse([*args, "--", *([] if _has_command(args) else [_shell()])])
        opts.pty = True
    else:
        opts = parse(args)
    job_args = [f"{k}={v}" if v else k for k, v in opts.given if k in JOB_OPTIONS]
    name = opts.name or os.path.basename(opts.argv[0])  # as Slurm names it
    import shlex
    import tempfile

    from podium.backends import open_backend  # the allocation goes through the daemon

    backend = open_backend()
    with tempfile.TemporaryDirectory(prefix="podium-srun-") as private:
        path = os.path.join(private, "sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        relay = f'exec "${{PODIUM_PYTHON:-python3}}" -m podium.compat attach {shlex.quote(path)}'
        mask = os.umask(0o022)
        os.umask(mask)
        jobs = backend.submit(
            {
                "wrap": relay,
                "options": [*job_args, "--output=/dev/null", f"--job-name={name}"],
                "cwd": os.getcwd(),
                "environment": dict(os.environ),
                "umask": mask,
            }
        )
        job_id = int(jobs[0]["job_id"])
        if tool == "salloc":
            print(f"salloc: Pending job allocation {job_id}", file=sys.stderr)
        conn = _wait_for_relay(tool, listener, backend, job_id)
        if conn is None:
            return 1
        if tool == "salloc":
            print(f"salloc: Granted job allocation {job_id}", file=sys.stderr)
        try:
            return _attached(conn, opts, args, as_step=tool == "srun")
        finally:
            if tool == "salloc":
                print(f"salloc: Relinquishing job allocation {job_id}", file=sys.stderr)
            _released(backend, job_id)


def _released(backend: Any, job_id: int, timeout: float = 10.0) -> None:
    """Return once the job has ended, so its GPUs are free for the next command (srun
    and salloc return after the allocation is released, as Slurm's do)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if backend.job(job_id)["state"] in TERMINAL_STATES:
            return
        time.sleep(0.01)  # the end is due within milliseconds: the command has exited


def _has_command(args: list[str]) -> bool:
    try:
        parse(args)
    except ValueError as exc:
        return "no command" not in str(exc)
    return True


def _shell() -> str:
    return os.environ.get("SHELL") or "/bin/sh"


def _wait_for_relay(
    tool: str, listener: socket.socket, backend: Any, job_id: int
) -> socket.socket | None:
    """The relay's connection once the job runs; None (after saying why) if the job
    ended first or the user gave up with Ctrl-C (the job is then cancelled)."""
    from podium.api.backend import Selection

    listener.settimeout(0.05)
    started = time.monotonic()
    said_waiting = False
    checked = 0.0
    try:
        while True:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                conn = None
            if conn is not None:
                creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
                if struct.unpack("3i", creds)[1] == os.getuid():  # (pid, uid, gid)
                    conn.settimeout(None)
                    if said_waiting:
                        print(f"{tool}: job {job_id} has been allocated resources", file=sys.stderr)
                    return conn
                conn.close()
                continue
            now = time.monotonic()
            if now - checked >= 0.5:
                checked = now
                job = backend.job(job_id)
                if job["state"] in TERMINAL_STATES:
                    why = job.get("reason") or "no reason given"
                    print(
                        f"{tool}: error: job {job_id} ended {job['state']} before it started"
                        f" ({why})",
                        file=sys.stderr,
                    )
                    return None
                if not said_waiting and now - started > 1.0:
                    print(f"{tool}: job {job_id} queued and waiting for resources", file=sys.stderr)
                    said_waiting = True
    except KeyboardInterrupt:
        backend.control("cancel", Selection((job_id,), None, None, None))
        print(f"{tool}: Job allocation {job_id} has been revoked.", file=sys.stderr)
        return None


def _attached(conn: socket.socket, opts: StepOptions, args: list[str], as_step: bool) -> int:
    """Hand the relay this terminal (or these pipes) and wait for the exit code. The
    command runs as step 0 (srun), or with the allocation's own environment (salloc)."""
    stdio = [0, 1, 2]
    header = {"args": args, "pty": opts.pty, "argv": opts.argv, "winsize": _winsize(0)}
    header["step"] = as_step
    socket.send_fds(conn, [json.dumps(header).encode() + b"\n"], stdio)
    saved = None
    if opts.pty and os.isatty(0):
        import tty

        saved = termios.tcgetattr(0)
        tty.setraw(0, termios.TCSANOW)  # keep what was typed ahead

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            if signum == signal.SIGWINCH:
                _send(conn, {"winsize": _winsize(0)})
            else:
                _send(conn, {"signal": signum})

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGWINCH):
        signal.signal(sig, forward)
    try:
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                break
            reply += chunk
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
    try:
        return int(json.loads(reply)["exit"])
    except (ValueError, KeyError, TypeError):
        print("srun: error: the allocation ended before its command did", file=sys.stderr)
        return 1


# -- the relay (the job's batch step) ---------------------------------------------------


def relay(path: str) -> int:
    """Connect to the client at `path`, take its descriptors and run its command: a
    step (podium.compat.srun) or, with a pty, the command on a new terminal."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while not data.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            return 1
        data += more
    header = json.loads(data)
    if len(fds) != 3:
        return 1
    try:
        if header["pty"]:
            code = _run_on_pty(conn, header, fds)
        else:
            code = _run_step(conn, header["args"], fds)
    except (ValueError, StepError, OSError) as exc:
        os.write(fds[2], f"srun: error: {exc}\n".encode())
        code = 1
    with contextlib.suppress(OSError):
        _send(conn, {"exit": code})
    return code


def _controls(conn: socket.socket) -> list[dict[str, Any]]:
    """The client's messages waiting on `conn` (signals, window sizes)."""
    data = b""
    with contextlib.suppress(BlockingIOError):
        data = conn.recv(65536, socket.MSG_DONTWAIT)
    out = []
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


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


def _run_on_pty(conn: socket.socket, header: dict[str, Any], fds: list[int]) -> int:
    """The command alone on a new pseudo-terminal, bytes copied between it and the
    client's terminal until it exits. As srun's, it is step 0 (recorded, with the
    step's variables); as salloc's, it has the allocation's environment."""
    argv = list(header["argv"])
    env = dict(os.environ)
    alloc = Allocation(env)
    step = Step(parse(["-n", "1", *argv]), alloc)
    step_dir = env[STEP_DIR_ENV] if header.get("step") and STEP_DIR_ENV in env else None
    record = step_record(
        0, name=os.path.basename(argv[0]), ntasks=1, node=alloc.node, gpus=step.gpus,
        pgid=None, start=time.time(),
    )  # fmt: skip
    if step_dir is not None:
        record["step_id"] = create_step(step_dir, record)
        env = task_env(env, alloc, step, record["step_id"], 0, free_port())
    master, slave = os.openpty()
    _set_winsize(slave, header.get("winsize"))
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
    """`python -m podium.compat attach SOCKET`: the relay, as a job's batch step."""
    if len(argv) != 1:
        print("podium.compat attach: expected the client's socket path", file=sys.stderr)
        return 2
    return relay(argv[0])
