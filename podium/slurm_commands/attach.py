"""Interactive allocations: `srun` and `salloc` outside a job, on the user's terminal.

As Slurm does it, the command runs inside the allocation, not on the submitting
host: here, as the batch step of a job, so the job's supervisor owns it (its cgroups,
limits, user and cleanup), and the user's terminal is wired to it.

1. The client makes a private directory (mode 0700) with a listening Unix socket and
   submits a job whose batch script runs `podium.slurm_commands attach SOCKET` (the relay).
   While the job waits, Slurm's messages are printed ("job N queued and waiting for
   resources"); Ctrl-C cancels it ("Job allocation N has been revoked").
2. The relay, running as the job, connects; the client checks the peer is its own
   user (SO_PEERCRED) and sends its srun arguments with its stdin, stdout and stderr
   (SCM_RIGHTS).
3. Without `--pty`, the relay runs the command as step 0 (podium.jobsteps.srun) with
   those descriptors: output reaches the user's terminal or pipe directly. With
   `--pty` (and for salloc), it runs the command on a new pseudo-terminal in its own
   session and copies bytes both ways; the client's terminal is raw meanwhile, so
   Ctrl-C reaches the job's foreground process as it would in a local shell. Window
   size changes follow.
4. The relay sends the exit code; the job ends with it, which ends the allocation.
   Signals the client gets (INT, TERM, HUP; without a pty) are passed on to the step.

This module is the client; the relay is podium.jobsteps.relay, and what they say to
each other is podium.jobsteps.wire.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import sys
import termios
import time
from typing import Any

from podium.api.states import TERMINAL_STATES
from podium.jobsteps.srun_options import StepOptions, parse
from podium.jobsteps.wire import RELAY_MAIN, decode, header, send

# srun options that shape the allocation; they go to the job as sbatch options.
JOB_OPTIONS = frozenset(
    {"--ntasks", "--nodes", "--ntasks-per-node", "--cpus-per-task", "--gpus-per-task"}
    | {"--gpus", "--job-name", "--chdir", "--partition", "--account", "--qos", "--time"}
    | {"--mem", "--mem-per-cpu", "--mem-per-gpu", "--gres", "--nodelist", "--exclude"}
    | {"--constraint", "--time-min", "--comment", "--gpus-per-node", "--cpus-per-gpu"}
    | {"--exclusive", "--signal"}
)


# -- the client (outside a job) -------------------------------------------------------


def _winsize(fd: int) -> list[int]:
    try:
        rows, cols, x, y = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
        return [rows, cols, x, y]
    except OSError:
        return [24, 80, 0, 0]


def allocate_and_run(tool: str, args: list[str]) -> int:
    """`srun ARGS` or `salloc ARGS` outside a job: an allocation, then the command on
    this terminal. Returns the command's exit code (1 if it never ran)."""
    if tool == "salloc":
        opts = parse(args if _has_command(args) else [*args, _shell()])
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
        relay = (  # the daemon's interpreter when this user may run it (as slurm_commands/bin's)
            'py=${PODIUM_PYTHON:-python3}; [ -x "$py" ] || py=python3; '
            f'exec "$py" -c {shlex.quote(RELAY_MAIN)} {shlex.quote(path)}'
        )
        mask = os.umask(0o022)
        os.umask(mask)
        jobs = backend.submit(
            {
                "wrap": relay,
                "options": [*job_args, "--output=/dev/null", f"--job-name={name}"],
                "cwd": os.getcwd(),
                "environment": {k: v for k, v in os.environ.items() if k != "PODIUM_TOKEN"},
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


def _give_up(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(signum)


def _wait_for_relay(
    tool: str, listener: socket.socket, backend: Any, job_id: int
) -> socket.socket | None:
    """The relay's connection once the job runs; None (after saying why) if the job
    ended first or the user gave up with Ctrl-C (the job is then cancelled)."""
    from podium.api.selection import Selection

    listener.settimeout(0.05)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # even if inherited ignored
        signal.signal(sig, _give_up)
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
    hello = header(args if not opts.pty else opts.argv, opts.pty, as_step, _winsize(0))
    socket.send_fds(conn, [hello], [0, 1, 2])
    saved = None
    if opts.pty and os.isatty(0):
        import tty

        saved = termios.tcgetattr(0)
        tty.setraw(0, termios.TCSANOW)  # keep what was typed ahead

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(OSError):
            if signum == signal.SIGWINCH:
                send(conn, {"winsize": _winsize(0)})
            else:
                send(conn, {"signal": signum})

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
    answer = decode(reply.strip())
    if answer is None or "exit" not in answer:
        print("srun: error: the allocation ended before its command did", file=sys.stderr)
        return 1
    return int(answer["exit"])
