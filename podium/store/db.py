"""Store: the jobs, nodes and events tables behind small, named operations.

Each public method is one transaction: it is either fully committed when it returns
or it raised and changed nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from podium.api.usage import decay
from podium.errors import NotFound, StoreError
from podium.spec.job import JobSpec, JobState
from podium.store.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION

Row = sqlite3.Row
RESERVE_BYTES = 8 << 20  # what the daemon keeps back to record outcomes on a full disk
_SQLITE_FULL = 13
_SQLITE_IOERR = 10


@dataclass(frozen=True)
class RunningStart:
    """What `mark_running` records for one job: where it runs and its output files."""

    job_id: int
    node: str
    gpu_ids: tuple[int, ...]
    cpus: int
    mem_mb: int
    stdout: str
    stderr: str
    cpu_ids: tuple[int, ...] = ()


class Store:
    """The embedded database at `path` (created on first use)."""

    def __init__(self, path: Path) -> None:
        """Open (or create) the database at `path`.

        Raises StoreError, naming the file and what to do, when an existing file is
        empty (history would silently vanish) or fails SQLite's integrity check.
        """
        self.path = path
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
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{path} is damaged ({exc}): restore it from a backup, or move it aside "
                "(with its -wal file) to start an empty cluster"
            ) from None

    def _migrate(self) -> None:
        version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:
            self.conn.executescript(SCHEMA)
            version = 1
        for target in range(version + 1, SCHEMA_VERSION + 1):
            self.conn.executescript(MIGRATIONS[target])
        if version != SCHEMA_VERSION:
            self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception.

        A `durable` commit is on disk when it returns (synchronous=FULL): used for what
        a user is told was accepted (submit, cancel, hold, drain). Other commits
        (the daemon's own bookkeeping) survive a crash of the daemon but may be lost
        with the machine's power, which the recovery protocol tolerates: the job files
        written by supervisors say what really happened.
        """
        try:
            self.conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
            if code not in (_SQLITE_FULL, _SQLITE_IOERR):
                raise
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            what = "is full" if code == _SQLITE_FULL else "failed a write"
            raise StoreError(
                f"the state disk {what}: nothing was recorded ({exc}); check the "
                f"filesystem of {self.path.parent}"
            ) from None

    # --- the reserve: space kept back for recording running jobs' outcomes ---------

    @property
    def reserve_path(self) -> Path:
        return self.path.with_name("podium.reserve")

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

    # --- jobs -----------------------------------------------------------------

    def insert_jobs(
        self,
        spec: JobSpec,
        *,
        uid: int,
        gid: int,
        user: str,
        now: float,
        idempotency_key: str | None = None,
    ) -> list[int]:
        """Insert a job (or every task of an array job) as PENDING; return the ids.

        With `idempotency_key`, the submission is remembered (a day) in the same commit,
        so `submitted(uid, key)` finds its jobs when the client retries.
        """
        indices: Sequence[int | None] = spec.array.indices if spec.array else [None]
        throttle = spec.array.throttle if spec.array else None
        spec_json = spec.model_dump_json()
        ids: list[int] = []
        with self.transaction(durable=True) as conn:
            for index in indices:
                cur = conn.execute(
                    """INSERT INTO jobs (array_task_id, array_throttle, name, user, uid, gid,
                         account, partition, qos, state, reason, held, nice, spec,
                         submit_time, gpus, cpus, mem_mb, time_limit_s, work_dir)
                       VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                    (
                        index,
                        throttle,
                        spec.name,
                        user,
                        uid,
                        gid,
                        spec.account,
                        spec.partition,
                        spec.qos,
                        JobState.PENDING.value,
                        "Held" if spec.hold else "None",
                        int(spec.hold),
                        spec.nice,
                        spec_json,
                        now,
                        spec.gpus,
                        spec.cpus,
                        spec.mem_mb,
                        spec.time_limit_s,
                        spec.work_dir,
                    ),
                )
                ids.append(int(cur.lastrowid or 0))
            if spec.array:
                conn.execute(
                    f"UPDATE jobs SET array_job_id=? WHERE job_id IN ({','.join('?' * len(ids))})",
                    (ids[0], *ids),
                )
            for job_id in ids:
                self._event(conn, now, "submit", job_id=job_id)
            if idempotency_key is not None:
                conn.execute("DELETE FROM submissions WHERE time < ?", (now - 86400,))
                conn.execute(
                    "INSERT INTO submissions (uid, key, job_ids, time) VALUES (?,?,?,?)",
                    (uid, idempotency_key, json.dumps(ids), now),
                )
        return ids

    def submitted(self, uid: int, idempotency_key: str) -> list[int] | None:
        """The job ids a submission of `uid` with this key created, or None."""
        row = self.conn.execute(
            "SELECT job_ids FROM submissions WHERE uid=? AND key=?", (uid, idempotency_key)
        ).fetchone()
        return None if row is None else [int(i) for i in json.loads(row["job_ids"])]

    def job(self, job_id: int) -> Row:
        """The row of `job_id`; raise NotFound."""
        row = self.conn.execute("SELECT * FROM jobs WHERE job_id=?", (job_id,)).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id}")
        return row  # type: ignore[no-any-return]

    def jobs_by_ids(self, ids: Iterable[int]) -> list[Row]:
        wanted = list(ids)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        return self.conn.execute(
            f"SELECT * FROM jobs WHERE job_id IN ({marks}) OR array_job_id IN ({marks}) "
            "ORDER BY job_id",
            (*wanted, *wanted),
        ).fetchall()

    def jobs(
        self,
        *,
        states: Iterable[str] | None = None,
        user: str | None = None,
        name: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int | None = None,
        qos: str | None = None,
    ) -> list[Row]:
        """Jobs filtered by state, user, name, QoS and [since, until] overlap; oldest first."""
        clauses: list[str] = []
        args: list[Any] = []
        if states is not None:
            state_list = list(states)
            clauses.append(f"state IN ({','.join('?' * len(state_list))})")
            args.extend(state_list)
        if user is not None:
            clauses.append("user=?")
            args.append(user)
        if name is not None:
            clauses.append("name=?")
            args.append(name)
        if qos is not None:
            clauses.append("qos=?")
            args.append(qos)
        if since is not None:
            clauses.append("(end_time IS NULL OR end_time >= ?)")
            args.append(since)
        if until is not None:
            clauses.append("submit_time <= ?")
            args.append(until)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        tail = f" LIMIT {int(limit)}" if limit else ""
        return self.conn.execute(
            f"SELECT * FROM jobs {where} ORDER BY job_id{tail}", args
        ).fetchall()

    def pending_brief(self) -> list[Row]:
        """PENDING jobs without their stored spec: what a scheduling pass reads each time."""
        return self.conn.execute(
            """SELECT job_id, user, name, account, partition, qos, submit_time, cpus, mem_mb,
                 gpus, nice, held, array_job_id, array_throttle, time_limit_s, exclude
               FROM jobs WHERE state='PENDING'"""
        ).fetchall()

    def states_of(self, job_ids: Iterable[int]) -> dict[int, str]:
        """Map each existing job id (and array tasks of array ids) to its state."""
        return {r["job_id"]: r["state"] for r in self.jobs_by_ids(job_ids)}

    def array_members(self, array_ids: Iterable[int]) -> dict[int, tuple[int, ...]]:
        ids = list(array_ids)
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        out: dict[int, list[int]] = {}
        for r in self.conn.execute(
            f"SELECT job_id, array_job_id FROM jobs WHERE array_job_id IN ({marks})", ids
        ):
            out.setdefault(r["array_job_id"], []).append(r["job_id"])
        return {k: tuple(v) for k, v in out.items()}

    def mark_running(self, starts: Sequence[RunningStart], now: float) -> list[int]:
        """PENDING -> RUNNING with their allocations, all in one commit.

        Returns the ids that were still PENDING (only those may be launched).
        """
        done: list[int] = []
        with self.transaction() as conn:
            for s in starts:
                cur = conn.execute(
                    """UPDATE jobs SET state='RUNNING', reason='None', start_time=?,
                         end_time=NULL, node=?, gpu_ids=?, cpu_ids=?, cpus=?, mem_mb=?,
                         stdout=?, stderr=?, exit_code=NULL, signal=NULL, preempt_mode=NULL
                       WHERE job_id=? AND state='PENDING'""",
                    (
                        now,
                        s.node,
                        json.dumps(list(s.gpu_ids)),
                        json.dumps(list(s.cpu_ids)) if s.cpu_ids else None,
                        s.cpus,
                        s.mem_mb,
                        s.stdout,
                        s.stderr,
                        s.job_id,
                    ),
                )
                if cur.rowcount == 1:
                    done.append(s.job_id)
                    self._event(conn, now, "start", job_id=s.job_id, node=s.node)
        return done

    def mark_ended(
        self,
        job_id: int,
        *,
        state: JobState,
        exit_code: int | None,
        signal: int | None,
        end_time: float,
        reason: str = "None",
    ) -> bool:
        """RUNNING -> a terminal state. Returns False if the job was not RUNNING."""
        with self.transaction() as conn:
            cur = conn.execute(
                """UPDATE jobs SET state=?, exit_code=?, signal=?, end_time=?, reason=?
                   WHERE job_id=? AND state='RUNNING'""",
                (state.value, exit_code, signal, end_time, reason, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, end_time, "end", job_id=job_id, detail=state.value)
            return cur.rowcount == 1

    def requeue_unlaunched(self, job_id: int, now: float) -> None:
        """RUNNING -> PENDING for a job whose supervisor never started (crash window)."""
        with self.transaction() as conn:
            conn.execute(
                """UPDATE jobs SET state='PENDING', reason='None', start_time=NULL, node=NULL,
                     gpu_ids=NULL WHERE job_id=? AND state='RUNNING'""",
                (job_id,),
            )
            self._event(conn, now, "relaunch", job_id=job_id, detail="supervisor never started")

    def requeue(
        self,
        job_id: int,
        now: float,
        why: str,
        *,
        exclude: Sequence[tuple[str, int]] | None = None,
        checkpoint_mtime: float | None = None,
        stalled_restarts: int | None = None,
    ) -> bool:
        """RUNNING -> PENDING again (preempted or failed node), restart count raised.

        The job keeps its id, submit time and checkpoint directory. `exclude` replaces
        the (node, GPU) pairs it must avoid; the progress fields are auto-resume's.
        """
        with self.transaction(durable=True) as conn:
            cur = conn.execute(
                """UPDATE jobs SET state='PENDING', reason='None', start_time=NULL,
                     end_time=NULL, node=NULL, gpu_ids=NULL, exit_code=NULL, signal=NULL,
                     restart_count=restart_count + 1,
                     exclude=COALESCE(?, exclude),
                     checkpoint_mtime=COALESCE(?, checkpoint_mtime),
                     stalled_restarts=COALESCE(?, stalled_restarts)
                   WHERE job_id=? AND state='RUNNING'""",
                (
                    None if exclude is None else json.dumps([list(e) for e in exclude]),
                    checkpoint_mtime,
                    stalled_restarts,
                    job_id,
                ),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "requeue", job_id=job_id, detail=why)
            return cur.rowcount == 1

    def charge(
        self, account: str, user: str, amount: float, now: float, half_life_s: float
    ) -> None:
        """Add `amount` (GPU-seconds) to the decayed usage of (account, user)."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT value, updated FROM usage WHERE account=? AND user=?", (account, user)
            ).fetchone()
            value = amount
            if row is not None:
                value += decay(row["value"], now - row["updated"], half_life_s)
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

    def cancel_pending(self, job_ids: Iterable[int], now: float, reason: str = "None") -> list[int]:
        """PENDING -> CANCELLED; returns the ids that were pending."""
        done: list[int] = []
        with self.transaction(durable=True) as conn:
            for job_id in job_ids:
                cur = conn.execute(
                    """UPDATE jobs SET state='CANCELLED', end_time=?, reason=?
                       WHERE job_id=? AND state='PENDING'""",
                    (now, reason, job_id),
                )
                if cur.rowcount == 1:
                    done.append(job_id)
                    self._event(conn, now, "cancel", job_id=job_id, detail=reason)
        return done

    def set_held(self, job_ids: Iterable[int], held: bool, now: float) -> list[int]:
        """Hold or release PENDING jobs; returns those changed."""
        done: list[int] = []
        with self.transaction(durable=True) as conn:
            for job_id in job_ids:
                cur = conn.execute(
                    "UPDATE jobs SET held=?, reason=? WHERE job_id=? AND state='PENDING'",
                    (int(held), "Held" if held else "None", job_id),
                )
                if cur.rowcount == 1:
                    done.append(job_id)
                    self._event(conn, now, "hold" if held else "release", job_id=job_id)
        return done

    def set_preempt_mode(self, job_id: int, mode: str) -> None:
        """Record that a running job is being preempted and how it ends (requeue or
        cancel), so that a restarted daemon finishes the preemption the same way."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET preempt_mode=? WHERE job_id=? AND state='RUNNING'", (mode, job_id)
            )

    def hold_broken(self, job_id: int, reason: str, now: float) -> bool:
        """Put a job that cannot be planned or launched back to PENDING, held, with
        `reason` (whatever it was: pending, or recorded RUNNING but never launched).
        Returns False if the job had already ended."""
        with self.transaction(durable=True) as conn:
            cur = conn.execute(
                """UPDATE jobs SET state='PENDING', held=1, reason=?, start_time=NULL,
                     node=NULL, gpu_ids=NULL WHERE job_id=? AND state IN ('PENDING','RUNNING')""",
                (reason, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "hold", job_id=job_id, detail=reason)
            return cur.rowcount == 1

    def set_reasons(self, reasons: dict[int, str]) -> None:
        """Record why pending jobs wait (only rows whose reason changed are written)."""
        if not reasons:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE jobs SET reason=? WHERE job_id=? AND state='PENDING' AND reason<>?",
                [(r, j, r) for j, r in reasons.items()],
            )

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

    def events(self, job_id: int | None = None) -> list[Row]:
        if job_id is None:
            return self.conn.execute("SELECT * FROM events ORDER BY id").fetchall()
        return self.conn.execute(
            "SELECT * FROM events WHERE job_id=? ORDER BY id", (job_id,)
        ).fetchall()


def spec_of(row: Row) -> JobSpec:
    """The JobSpec stored with a job row."""
    return JobSpec.model_validate_json(row["spec"])
