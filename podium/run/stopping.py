"""Waiting on a child of the supervisor while the job may be stopped.

Standard library only (the supervisor imports it at every job start).

The supervisor keeps its signals blocked and reads them with sigtimedwait, so while it
waits on something else (a task's exec, an image pull) a cancel stays pending and is
seen only when it looks. `wait_readable` looks: it returns once a child's descriptor is
readable, and gives up on the child the moment the job is stopped (cancel, preemption,
a GPU fault) or its time limit passes, whatever the child is blocked in (an open() of a
FIFO, a hung file system, a slow registry). The child is SIGKILLed, which ends even an
uninterruptible wait on a FUSE or NFS file, so no user can make a job outlive a cancel.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
PREEMPT_SIGNAL = signal.SIGUSR1
FAULT_SIGNAL = signal.SIGUSR2
POLL_S = 0.1


class Stopped(Exception):
    """The job was stopped while the supervisor waited on a child; `state` is the job's
    end state: CANCELLED, PREEMPTED, NODE_FAIL or TIMEOUT."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


def pending_stop(end: float | None) -> str | None:
    """The state the job must end in now, judged from the blocked signals pending (none
    is consumed) and the time limit's `end` (epoch seconds; None: no limit); None when
    nothing stops it."""
    pending = signal.sigpending()
    if pending & STOP_SIGNALS:
        return "CANCELLED"
    if FAULT_SIGNAL in pending:
        return "NODE_FAIL"
    if PREEMPT_SIGNAL in pending:
        return "PREEMPTED"
    if end is not None and time.time() >= end:
        return "TIMEOUT"
    return None


class ChildError(Exception):
    """The function run by `call_in_child` raised; the message is its exception's."""


def wait_readable(
    fd: int, child: int, end: float | None, *, group: bool = False, poll_s: float = POLL_S
) -> None:
    """Return once `fd` is readable (data or end of file). If the job is stopped first
    (`pending_stop(end)`), SIGKILL process `child` (with `group`, its whole process
    group) and raise Stopped; the caller still reaps the child."""
    while True:
        ready, _, _ = select.select([fd], [], [], poll_s)
        if ready:
            return
        state = pending_stop(end)
        if state is not None:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if group else os.kill)(child, signal.SIGKILL)
            raise Stopped(state)


def call_in_child(fn: Callable[[], Any], end: float | None) -> Any:
    """`fn()` run in a forked child that leads a process group of its own (whatever it
    starts joins it), its JSON-able result returned. Raises ChildError with the message
    of what `fn` raised, or Stopped, the child's whole group killed, when the job is
    stopped or reaches `end` first. For the single-threaded supervisor only."""
    read_end, write_end = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (a child; its report is what the tests see)
        code = 1
        try:
            os.close(read_end)
            os.setpgid(0, 0)
            try:
                report = {"ok": fn()}
            except Exception as exc:  # the caller's to judge, as ChildError
                report = {"error": str(exc) or type(exc).__name__}
            data = json.dumps(report).encode()
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view) :]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    chunks: list[bytes] = []
    try:
        while True:
            wait_readable(read_end, pid, end, group=True)
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    try:
        report = json.loads(b"".join(chunks))
    except ValueError:
        raise ChildError("the child ended without a report") from None
    if "error" in report:
        raise ChildError(report["error"])
    return report["ok"]


__all__ = [
    "FAULT_SIGNAL",
    "PREEMPT_SIGNAL",
    "STOP_SIGNALS",
    "ChildError",
    "Stopped",
    "call_in_child",
    "pending_stop",
    "wait_readable",
]
