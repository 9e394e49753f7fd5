"""The database underneath the Store: connection, schema migrations, transactions,
the full-disk reserve, fair-share usage, nodes and events."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from podium.api.usage import charged, decay
from podium.errors import NotFound, StateDiskFull, StoreError
from podium.store.brief import Row, brief_from_json
from podium.store.group_commit import WalSync
from podium.store.integrity import APPLICATION_ID, missing, refusal
from podium.store.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION

RESERVE_BYTES = 8 << 20  # what the daemon keeps back to record outcomes on a full disk
_SQLITE_FULL = 13
_SQLITE_IOERR = 10


def reserve_path(db_path: Path) -> Path:
    """The reserve kept beside the database at `db_path` (podium.reserve)."""
    return db_path.with_name("podium.reserve")


class Database:
    """The embedded database at `path` (created on first use): the connection, its
    schema, transactions, the disk reserve, fair-share usage, nodes and events."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the database at `path`.

        Raises StoreError, naming the file and what to do, when an existing file is
        empty (history would silently vanish), fails SQLite's integrity check, is not
        a Podium database, was written by a newer version, or lacks part of this
        version's schema (podium.store.integrity); such a file is left as it was.
        """
        self.path = path
        self._changed: set[int] = set()
        self._wal_sync = WalSync(path)
        self._deferring = threading.local()  # .ticket inside group_commit, per thread
        self._sync_mode = ""
        existed = path.exists()
        if existed and path.stat().st_size == 0:
            raise StoreError(
                f"{path} is empty (0 bytes): the cluster's history is gone. Restore it from "
                "a backup, or move it aside to start an empty cluster"
            )
        try:
            self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA busy_timeout=5000")
            if existed:
                problems = [r[0] for r in self.conn.execute("PRAGMA quick_check(3)")]
                if problems != ["ok"]:
                    raise sqlite3.DatabaseError(problems[0])
                why = refusal(self.conn, str(path))
                if why is not None:
                    self.conn.close()
                    raise StoreError(why)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self._migrate()
            lacking = missing(self.conn)
            if lacking is not None:
                raise sqlite3.DatabaseError(lacking)
        except sqlite3.DatabaseError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code in (_SQLITE_FULL, _SQLITE_IOERR) and self._disk_is_full():
                self.conn.close()
                raise StateDiskFull(
                    f"the state disk is full: {path} cannot be opened ({exc}); make room on "
                    f"the filesystem of {path.parent} (the database is intact)"
                ) from None
            raise StoreError(
                f"{path} is damaged ({exc}): restore it from a backup, or move it aside "
                "(with its -wal file) to start an empty cluster"
            ) from None

    def _disk_is_full(self) -> bool:
        """Whether the database's filesystem has no room left to write a page."""
        try:
            return shutil.disk_usage(self.path.parent).free < 64 * 1024
        except OSError:
            return False

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self.conn.executescript(SCHEMA)
            version = 1
        for target in range(version + 1, SCHEMA_VERSION + 1):
            self.conn.executescript(MIGRATIONS[target])
        if version < 5:
            self._fill_briefs()
        if version != SCHEMA_VERSION:
            self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        if self.conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            self.conn.execute(f"PRAGMA application_id={APPLICATION_ID}")

    def _fill_briefs(self) -> None:
        """Write the brief of rows stored before version 5 (unreadable specs: `{}`)."""
        rows = self.conn.execute("SELECT job_id, spec FROM jobs WHERE brief IS NULL").fetchall()
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE jobs SET brief=? WHERE job_id=?",
                [(brief_from_json(r["spec"]), r["job_id"]) for r in rows],
            )

    def close(self) -> None:
        self.conn.close()

    def keep_ids_above(self, highest: int) -> bool:
        """Make the next job id greater than `highest` (a job id found on disk that this
        database may not know: one it was given before the database was replaced), so
        no id is ever given twice on one state directory. Returns whether ids moved."""
        if highest <= 0:
            return False
        with self.transaction(durable=True) as conn:
            row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name='jobs'").fetchone()
            if row is not None and row[0] >= highest:
                return False
            if row is None:
                conn.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', ?)", (highest,)
                )
            else:
                conn.execute("UPDATE sqlite_sequence SET seq=? WHERE name='jobs'", (highest,))
        return True

    def has_changes(self) -> bool:
        """Whether any job changed since the last `take_changed`."""
        return bool(self._changed)

    def take_changed(self) -> set[int]:
        """The ids of jobs whose state, hold or allocation changed since the last call
        (what a cache of pending jobs must read again); the set is emptied."""
        changed, self._changed = self._changed, set()
        return changed

    @contextmanager
    def group_commit(self) -> Iterator[None]:
        """Durable transactions this thread makes inside commit without flushing the
        disk; on leaving, the thread waits until they are on disk, sharing one flush
        with every thread that committed meanwhile (podium.store.group_commit). Enter
        it before taking a lock other requests need and leave it after releasing it:
        that is what lets their commits share the flush. Nested uses are one.

        Raises StoreError on leaving when the flush fails.
        """
        if getattr(self._deferring, "ticket", None) is not None:
            yield
            return
        self._deferring.ticket = 0
        try:
            yield
        finally:
            ticket, self._deferring.ticket = self._deferring.ticket, None
            if ticket:
                self._wal_sync.wait_durable(ticket)

    @property
    def flushes(self) -> int:
        """How many group flushes were made (tests and benchmarks)."""
        return self._wal_sync.flushes

    @contextmanager
    def transaction(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception.

        A `durable` commit is on disk when it returns (synchronous=FULL): used for what
        a user is told was accepted (submit, cancel, hold, drain). Inside `group_commit`
        it is on disk when the thread leaves the group commit instead. Other commits
        (the daemon's own bookkeeping) survive a crash of the daemon but may be lost
        with the machine's power, which the recovery protocol tolerates: the job files
        written by supervisors say what really happened.
        """
        deferred = durable and getattr(self._deferring, "ticket", None) is not None
        mode = "FULL" if durable and not deferred else "NORMAL"
        try:
            if mode != self._sync_mode:
                self.conn.execute(f"PRAGMA synchronous={mode}")
                self._sync_mode = mode
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
            if deferred:
                self._deferring.ticket = self._wal_sync.ticket()
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (_SQLITE_FULL, _SQLITE_IOERR):
                raise
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            full = code == _SQLITE_FULL or self._disk_is_full()
            raise (StateDiskFull if full else StoreError)(
                f"the state disk {'is full' if full else 'failed a write'}: nothing was "
                f"recorded ({exc}); check the filesystem of {self.path.parent}"
            ) from None

    # --- the reserve: space kept back for recording running jobs' outcomes ---------

    @property
    def reserve_path(self) -> Path:
        return reserve_path(self.path)

    @property
    def reserve_released(self) -> bool:
        """True after `release_reserve`, until `keep_reserve` could make it again."""
        return not self.reserve_path.exists()

    def keep_reserve(self, size: int = RESERVE_BYTES) -> bool:
        """Hold `size` bytes of the state disk in a file, if there is room to spare
        (twice that free). Returns whether the reserve exists now."""
        if self.reserve_path.exists():
            return True
        try:
            free = shutil.disk_usage(self.path.parent).free
            if free < 2 * size:
                return False
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError:
            self.reserve_path.unlink(missing_ok=True)
            return False
        return True

    def release_reserve(self) -> bool:
        """Give the reserve back to the disk (when a write failed for space). Returns
        False when there was none to give."""
        try:
            self.reserve_path.unlink()
        except FileNotFoundError:
            return False
        return True

    def charge(
        self, account: str, user: str, amount: float, now: float, half_life_s: float
    ) -> None:
        """Add `amount` (GPU-seconds) to the decayed usage of (account, user)."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT value, updated FROM usage WHERE account=? AND user=?", (account, user)
            ).fetchone()
            old, updated = (None, now) if row is None else (row["value"], row["updated"])
            value = charged(old, updated, amount, now, half_life_s)
            conn.execute(
                "INSERT OR REPLACE INTO usage (account, user, value, updated) VALUES (?,?,?,?)",
                (account, user, value, now),
            )

    def usage(self, now: float, half_life_s: float) -> dict[tuple[str, str], float]:
        """Every (account, user)'s usage, decayed to `now`."""
        return {
            (r["account"], r["user"]): decay(r["value"], now - r["updated"], half_life_s)
            for r in self.conn.execute("SELECT * FROM usage")
        }

    # --- nodes ----------------------------------------------------------------

    def ensure_node(self, name: str) -> None:
        with self.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO nodes (name) VALUES (?)", (name,))

    def node(self, name: str) -> Row:
        row = self.conn.execute("SELECT * FROM nodes WHERE name=?", (name,)).fetchone()
        if row is None:
            raise NotFound(f"no node {name!r}")
        return row  # type: ignore[no-any-return]

    def nodes(self) -> list[Row]:
        return self.conn.execute("SELECT * FROM nodes ORDER BY name").fetchall()

    def set_node_state(
        self, name: str, admin_state: str, reason: str | None, uid: int | None, now: float
    ) -> None:
        with self.transaction(durable=True) as conn:
            conn.execute(
                "UPDATE nodes SET admin_state=?, reason=?, reason_uid=?, reason_time=? "
                "WHERE name=?",
                (admin_state, reason, uid, now, name),
            )
            self._event(conn, now, admin_state, node=name, detail=reason)

    # --- events ---------------------------------------------------------------

    def _event(
        self,
        conn: sqlite3.Connection,
        now: float,
        kind: str,
        *,
        job_id: int | None = None,
        node: str | None = None,
        detail: str | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO events (time, job_id, node, kind, detail) VALUES (?,?,?,?,?)",
            (now, job_id, node, kind, detail),
        )

    def event(
        self, now: float, kind: str, *, job_id: int | None = None, detail: str | None = None
    ) -> None:
        """Record an event on its own."""
        with self.transaction() as conn:
            self._event(conn, now, kind, job_id=job_id, detail=detail)

    def node_events(self, limit: int) -> list[Row]:
        """The newest `limit` events of nodes and their GPUs (health findings, fences,
        remedies), newest first: those with a node and no job."""
        return self.conn.execute(
            "SELECT * FROM events WHERE job_id IS NULL AND node IS NOT NULL"
            " ORDER BY id DESC LIMIT ?",
            (limit,),
        ).fetchall()

    def events(self, job_id: int | None = None) -> list[Row]:
        if job_id is None:
            return self.conn.execute("SELECT * FROM events ORDER BY id").fetchall()
        return self.conn.execute(
            "SELECT * FROM events WHERE job_id=? ORDER BY id", (job_id,)
        ).fetchall()
