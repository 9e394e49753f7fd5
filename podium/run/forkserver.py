"""A warm supervisor launcher: one process that has imported the supervisor and forks
one supervisor per job, so a job start costs a fork instead of a new interpreter.

The daemon starts it (`Launcher`) in a session of its own, connected by a Unix
socketpair, and asks it to start a job's supervisor with one message: the job
directory, and by SCM_RIGHTS the job's lock descriptor and the supervisor log's. The
server blocks the supervisor's signals, forks, and answers with the child's pid. The
child leaves the server's session for its own, points its standard streams at
/dev/null and the log, closes every other descriptor, and runs
`podium.run.supervisor.main` as a fresh `python -c` would.

What keeps a job from running twice or being lost is unchanged (podium.run.executor's
launch protocol): the lock descriptor is the token. It travels inside the message, so
until the child holds it, it is held by the daemon's copy or by the message in
flight; a server killed before forking takes the message with it and the lock is
free again (the job reads as never launched); a server killed after forking leaves a
child that holds the lock. Supervisors do not depend on the server: it exits when the
daemon's end of the socket closes, and the supervisors it forked keep running (their
parent becomes init, which reaps them).

Standard library only; the server is single-threaded, so forking it is safe.
"""

from __future__ import annotations

import array
import gc
import os
import signal
import socket
import sys

from podium.run.supervisor import WATCHED
from podium.run.supervisor_main import main

MAX_MESSAGE = 4096
SERVER_MAIN = "import sys; from podium.run.forkserver import serve; sys.exit(serve(sys.argv))"
SUPERVISOR_NAME = "podium.run.supervisor"  # on the server's command line: `ps` finds it


def _send_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def _recv_fds(sock: socket.socket, max_fds: int) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = sock.recvmsg(MAX_MESSAGE, socket.CMSG_LEN(max_fds * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % fds.itemsize
            fds.frombytes(payload[:usable])
    return data, list(fds)


def request(sock: socket.socket, job_dir: str, lock_fd: int, log_fd: int) -> int:
    """Ask the server on `sock` to start the supervisor of `job_dir`; its pid.

    Raises OSError when the server is gone or does not answer within the socket's
    timeout, and RuntimeError with the server's reason when it could not fork."""
    _send_fds(sock, os.fsencode(job_dir), [lock_fd, log_fd])
    reply = sock.recv(MAX_MESSAGE)
    if not reply:
        raise ConnectionResetError("the supervisor launcher closed its socket")
    text = reply.decode(errors="replace")
    if text.startswith("!"):
        raise RuntimeError(text[1:])
    return int(text)


def _child(job_dir: str, lock_fd: int, log_fd: int, server_fd: int) -> None:
    """In the forked child: become a supervisor as `python -c SUPERVISOR_MAIN` would
    start, then exit with its status. Never returns."""
    code = 1
    try:
        os.close(server_fd)
        os.setsid()
        # The dispositions a fresh interpreter starts with (the server ignores
        # SIGCHLD, which would reap the supervisor's children before it could).
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        keep = sorted({0, 1, 2, lock_fd})
        for low, high in zip(keep, [*keep[1:], 65536], strict=True):
            os.closerange(low + 1, high)
        os.chdir("/")
        argv = [SUPERVISOR_NAME, job_dir, str(lock_fd)]
        sys.argv = argv
        code = main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(argv: list[str]) -> int:
    """The server's loop: `argv[-1]` is its end of the socketpair (the arguments
    before it only name it for `ps`). One request at a time; exits 0 when the
    daemon's end closes."""
    sock = socket.socket(fileno=int(argv[-1]))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon's terminal is not ours
    gc.collect()
    gc.freeze()  # what is imported stays shared with the children, not copied
    while True:
        try:
            data, fds = _recv_fds(sock, 2)
        except InterruptedError:
            continue
        except OSError:
            return 0
        if not data and not fds:
            return 0
        if len(fds) != 2:
            for fd in fds:
                os.close(fd)
            sock.send(b"!expected a lock and a log descriptor")
            continue
        lock_fd, log_fd = fds
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, WATCHED)
        try:
            pid = os.fork()
        except OSError as exc:
            pid = -1
            reply = f"!fork failed: {exc.strerror}".encode()
        if pid == 0:
            _child(os.fsdecode(data), lock_fd, log_fd, sock.fileno())
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.close(lock_fd)
        os.close(log_fd)
        if pid > 0:
            reply = str(pid).encode()
        try:
            sock.send(reply)
        except OSError:
            return 0


__all__ = ["SERVER_MAIN", "SUPERVISOR_NAME", "request", "serve"]
