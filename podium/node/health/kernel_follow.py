"""Following the kernel's log as it is written, so an Xid is acted on within a second.

The health agent reads Xid events with its quick checks every `health.interval_s`
(30 s by default): a GPU that fell off the bus would go unnoticed that long. A
`KernelLogFollower` watches the same source the Xid check reads, on a thread of its
own: /dev/kmsg by poll(2) (the kernel wakes it when a record is written), or the file
`health.kernel_log` names, looked at every FILE_POLL_S. When new text carries an Xid it
calls `on_xid()`, once per batch of records; the caller runs its Xid check then (that
check keeps the cursor and judges each event: this class only says "look now").

It never raises into its thread's caller: a source it cannot open is reported by
`start()` returning the reason, and errors later end the thread with a log line (the
periodic check goes on reading as before).
"""

from __future__ import annotations

import errno
import logging
import os
import select
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("podium.agent")

XID_MARKER = b"NVRM: Xid"
FILE_POLL_S = 0.2  # how often a kernel-log file is looked at (no inotify in the stdlib)
STOP_POLL_S = 1.0  # the longest stop() waits for the thread to end


class KernelLogFollower:
    """Calls `on_xid()` soon after an Xid line reaches `source` (/dev/kmsg when
    `is_kmsg`, else a file written by syslog or a test)."""

    def __init__(self, source: Path, is_kmsg: bool, on_xid: Callable[[], None]) -> None:
        self.source = source
        self.is_kmsg = is_kmsg
        self.on_xid = on_xid
        self._stop = threading.Event()
        self._wake: int | None = None  # written by stop(): ends a poll of /dev/kmsg at once
        self._thread: threading.Thread | None = None

    def start(self) -> str | None:
        """Start following from the end of the source (what is there is the periodic
        check's). Returns None, or why it cannot follow (then nothing runs)."""
        try:
            if self.is_kmsg:
                fd = os.open(self.source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                os.lseek(fd, 0, os.SEEK_END)  # the next record written from now on
                woken, self._wake = os.pipe2(os.O_CLOEXEC)
                target: Callable[[], None] = lambda: self._follow_kmsg(fd, woken)  # noqa: E731
            else:
                start = _size_and_inode(self.source)
                target = lambda: self._follow_file(*start)  # noqa: E731
        except OSError as exc:
            return f"cannot follow {self.source} ({exc.strerror})"
        self._thread = threading.Thread(target=target, name="podium-kmsg", daemon=True)
        self._thread.start()
        return None

    def stop(self) -> None:
        """End the thread (at once: its wait is woken) and wait for it. Idempotent."""
        self._stop.set()
        if self._wake is not None:
            os.close(self._wake)  # the poll sees the pipe's end
            self._wake = None
        if self._thread is not None:
            self._thread.join(timeout=STOP_POLL_S)

    def _follow_kmsg(self, fd: int, woken: int) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([fd, woken], [], [])
                if fd in ready and self._xid_in(_kmsg_records(fd)):
                    self.on_xid()
        except Exception:  # a follower must not take the daemon down
            log.exception("following %s stopped; Xid events are read every interval", self.source)
        finally:
            os.close(fd)
            os.close(woken)

    def _follow_file(self, offset: int, inode: int) -> None:
        try:
            while not self._stop.wait(FILE_POLL_S):
                try:
                    size, now_inode = _size_and_inode(self.source)
                except FileNotFoundError:
                    continue  # being rotated
                if now_inode != inode or size < offset:
                    offset, inode = 0, now_inode  # rotated or truncated: all of it is new
                if size == offset:
                    continue
                with open(self.source, "rb") as fh:
                    fh.seek(offset)
                    data = fh.read(size - offset)
                offset += len(data)
                if XID_MARKER in data:
                    self.on_xid()
        except Exception:
            log.exception("following %s stopped; Xid events are read every interval", self.source)

    @staticmethod
    def _xid_in(records: list[bytes]) -> bool:
        return any(XID_MARKER in r for r in records)


def _kmsg_records(fd: int) -> list[bytes]:
    """Every record readable now from a non-blocking /dev/kmsg descriptor."""
    records: list[bytes] = []
    while True:
        try:
            record = os.read(fd, 16384)
        except BlockingIOError:
            return records
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # records overwritten before we read them
                continue
            raise
        if not record:
            return records
        records.append(record)


def _size_and_inode(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_ino


__all__ = ["FILE_POLL_S", "XID_MARKER", "KernelLogFollower"]
