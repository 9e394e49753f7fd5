"""Group commit: one flush of the write-ahead log for a burst of acknowledged writes.

A request that changes the cluster commits under the daemon's lock. With
`synchronous=FULL`, SQLite flushes the WAL inside that commit, so every submission
holds the lock for a disk flush and concurrent submissions queue behind each other's.
Instead, a commit made inside `Database.group_commit` is written with
`synchronous=NORMAL` (in the WAL, in the page cache) and takes a ticket; after the lock
is released, the request waits in `WalSync.wait_durable` until a flush that started
after its commit has finished. One thread (the leader) flushes; the ones that commit
while it does wait for the next flush, which then covers all of them. Nothing is
acknowledged before its commit is on disk, exactly as with FULL (the same
`fdatasync` of the same file), and with one flush per burst instead of one per request.

Why flushing the WAL file from outside SQLite is enough: in WAL mode a commit appends
its frames (the last one marked as a commit) to the `-wal` file with write(2); the
flush SQLite's FULL mode adds is an fdatasync(2) of that file, and an fdatasync
through any descriptor of the file flushes its pages. The WAL is only rewritten from
its start after a checkpoint, and a checkpoint flushes the WAL and then the database
file itself before it copies anything (NORMAL still does that), so a commit is never
overwritten before it is durable in one of the two files.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from podium.errors import StoreError


class WalSync:
    """Tickets for commits whose flush is deferred, and the leader/follower flush of
    the database's WAL that makes them durable."""

    def __init__(self, db_path: Path) -> None:
        self._db = db_path
        self._wal = Path(f"{db_path}-wal")
        self._cond = threading.Condition()
        self._issued = 0  # tickets issued: one per deferred commit
        self._durable = 0  # every ticket up to this one is on disk
        self._flushing = False
        self._dir_synced = False
        self.flushes = 0  # how many flushes were made (for tests and benchmarks)

    def ticket(self) -> int:
        """Called right after a deferred commit (its frames are in the WAL): the
        ticket to pass to `wait_durable`."""
        with self._cond:
            self._issued += 1
            return self._issued

    def wait_durable(self, ticket: int) -> None:
        """Return once the commit of `ticket` is on disk: flush the WAL as the leader
        if no flush is under way, else wait for the one under way and, when it began
        before this commit, lead or wait for the next.

        Raises StoreError when the flush fails (the commit may be lost with the
        machine's power, so it must not be acknowledged as durable).
        """
        with self._cond:
            while self._durable < ticket:
                if not self._flushing:
                    self._flushing = True
                    covers = self._issued  # every commit made so far is in the WAL
                    break
                self._cond.wait()
            else:
                return
        flushed = False
        try:
            self._flush()
            flushed = True
        finally:
            with self._cond:
                self._flushing = False
                if flushed:
                    self._durable = max(self._durable, covers)
                    self.flushes += 1
                self._cond.notify_all()

    def _flush(self) -> None:
        """fdatasync the WAL (the database file when there is no WAL yet), and once
        the directory that holds them."""
        try:
            try:
                fd = os.open(self._wal, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = os.open(self._db, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
            if not self._dir_synced:
                dir_fd = os.open(self._db.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
                self._dir_synced = True
        except OSError as exc:
            raise StoreError(
                f"the state disk failed to flush {self._wal.name} ({exc.strerror}): what was "
                f"just changed may not survive a power loss; check the filesystem of "
                f"{self._db.parent}"
            ) from None
