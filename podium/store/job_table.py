"""Job rows: submit (jobs, batches, array tasks split off) and the queries over them.
Their runs' transitions (start, end, requeue, cancel) are `job_runs.JobRuns`'. Each
public method is one transaction (see Database.transaction)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from podium.api import arrays
from podium.api.selection import JobFilter
from podium.errors import NotFound
from podium.jobspec.job import JobSpec, JobState
from podium.store.brief import LIST_COLUMNS, SPEC_COLUMN, Row, brief_of
from podium.store.changes import JobChanges

# A task split off its array's row (JobStore.split_tasks): the array's fields, its own
# index and the next id; no spec of its own (it reads the array row's).
_SPLIT = """INSERT INTO jobs (array_job_id, array_task_id, array_throttle, name, user, uid,
    gid, account, partition, qos, state, reason, held, nice, spec, submit_time, gpus, cpus,
    mem_mb, time_limit_s, work_dir, brief, exclude)
  SELECT array_job_id, ?, array_throttle, name, user, uid, gid, account, partition, qos,
    state, reason, held, nice, '', submit_time, gpus, cpus, mem_mb, time_limit_s,
    work_dir, brief, exclude FROM jobs WHERE job_id=?"""


class JobStore(JobChanges):
    """The jobs table's operations."""

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
        """Insert a job (an array as one row, see `_insert`) as PENDING; return its id
        (in a list).

        With `idempotency_key`, the submission is remembered (a day) in the same commit,
        so `submitted(uid, key)` finds its jobs when the client retries.
        """
        return self.insert_batch(
            [spec], uid=uid, gid=gid, user=user, now=now, idempotency_key=idempotency_key
        )[0]

    def insert_batch(
        self,
        specs: Sequence[JobSpec],
        *,
        uid: int,
        gid: int,
        user: str,
        now: float,
        idempotency_key: str | None = None,
    ) -> list[list[int]]:
        """Insert several jobs in one commit, all or none: each spec's id (in a list),
        in order. `idempotency_key` remembers the whole batch (its ids, flat)."""
        created: list[list[int]] = []
        with self.transaction(durable=True) as conn:
            for spec in specs:
                created.append(self._insert(conn, spec, uid, gid, user, now))
            flat = [job_id for ids in created for job_id in ids]
            if idempotency_key is not None:
                conn.execute("DELETE FROM submissions WHERE time < ?", (now - 86400,))
                conn.execute(
                    "INSERT INTO submissions (uid, key, job_ids, time) VALUES (?,?,?,?)",
                    (uid, idempotency_key, json.dumps(flat), now),
                )
        self._changed.update(flat)
        return created

    def _insert(
        self, conn: sqlite3.Connection, spec: JobSpec, uid: int, gid: int, user: str, now: float
    ) -> list[int]:
        """One job's row and its submit event, in `conn`'s transaction; its id (in a
        list). An array, however many tasks it has, is one row too (O(1)): its id is
        the array's, it stores the spec, and `array_pending` holds the indices of its
        tasks not yet started (`split_tasks` gives a task a row of its own)."""
        pending = spec.array.ranges if spec.array else None
        cur = conn.execute(
            """INSERT INTO jobs (array_throttle, name, user, uid, gid, account, partition, qos,
                 state, reason, held, nice, spec, submit_time, gpus, cpus, mem_mb,
                 time_limit_s, work_dir, brief, array_pending)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                spec.array.throttle if spec.array else None,
                spec.name,
                user,
                uid,
                gid,
                spec.account,
                spec.partition,
                spec.qos,
                JobState.PENDING.value,
                "JobHeldUser" if spec.hold else "None",
                int(spec.hold),
                spec.nice,
                spec.model_dump_json(),
                now,
                spec.gpus,
                spec.cpus,
                spec.mem_mb,
                spec.time_limit_s,
                spec.work_dir,
                brief_of(spec),
                pending,
            ),
        )
        job_id = int(cur.lastrowid or 0)
        detail = None
        if spec.array:
            conn.execute("UPDATE jobs SET array_job_id=? WHERE job_id=?", (job_id, job_id))
            detail = f"array of {spec.array.count} task(s): {pending}"
        self._event(conn, now, "submit", job_id=job_id, detail=detail)
        return [job_id]

    def split_tasks(
        self, array_id: int, count: int, now: float, index: int | None = None
    ) -> list[int]:
        """Give `count` pending tasks of array `array_id` rows of their own (the lowest
        indices first, or the task `index` alone), as Slurm splits a task off its
        array's record when it starts or is acted on alone; their job ids, in index
        order (fewer when fewer are pending; none when `index` is not).

        A new row copies the array row's fields (its spec is the array row's, see
        SPEC_COLUMN) under the next job id; the array's last pending task takes the
        array row itself, which keeps the array's id (as in Slurm)."""
        created: list[int] = []
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT array_pending FROM jobs WHERE job_id=? AND array_pending IS NOT NULL",
                (array_id,),
            ).fetchone()
            if row is None:
                return []
            ranges = arrays.parse(row["array_pending"])
            if index is not None and not arrays.holds(ranges, index):
                return []
            for _ in range(count if index is None else 1):
                if not ranges:
                    break
                task = arrays.lowest(ranges) if index is None else index
                ranges = arrays.without(ranges, task)
                if ranges:
                    cur = conn.execute(_SPLIT, (task, array_id))
                    created.append(int(cur.lastrowid or 0))
                    detail = f"task {task} of array {array_id}"
                    self._event(conn, now, "submit", job_id=created[-1], detail=detail)
                else:
                    conn.execute(
                        "UPDATE jobs SET array_task_id=?, array_pending=NULL WHERE job_id=?",
                        (task, array_id),
                    )
                    created.append(array_id)
            if ranges:
                conn.execute(
                    "UPDATE jobs SET array_pending=? WHERE job_id=?",
                    (arrays.format_ranges(ranges), array_id),
                )
        self._changed.update([array_id, *created])
        return created

    def submitted(self, uid: int, idempotency_key: str) -> list[int] | None:
        """The job ids a submission of `uid` with this key created, or None."""
        row = self.conn.execute(
            "SELECT job_ids FROM submissions WHERE uid=? AND key=?", (uid, idempotency_key)
        ).fetchone()
        return None if row is None else [int(i) for i in json.loads(row["job_ids"])]

    def job(self, job_id: int) -> Row:
        """The row of `job_id`; raise NotFound."""
        row = self.conn.execute(
            f"SELECT {LIST_COLUMNS}, {SPEC_COLUMN} FROM jobs WHERE job_id=?", (job_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no job {job_id}")
        return row  # type: ignore[no-any-return]

    def jobs_by_ids(self, ids: Iterable[int], *, with_spec: bool = False) -> list[Row]:
        """The rows of these jobs and of the tasks of arrays among them (without the
        stored spec unless `with_spec`)."""
        wanted = list(ids)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        columns = f"{LIST_COLUMNS}, {SPEC_COLUMN}" if with_spec else LIST_COLUMNS
        return self.conn.execute(
            f"SELECT {columns} FROM jobs WHERE job_id IN ({marks}) OR array_job_id IN ({marks}) "
            "ORDER BY job_id",
            (*wanted, *wanted),
        ).fetchall()

    def task_row(self, array_id: int, index: int) -> Row:
        """The row that stands for task `index` of array `array_id`: its own once it
        has one (started, or acted on alone), else the array's row while the task
        waits in it (that row's `array_task_id` is not `index`); raises NotFound."""
        row: Row | None = self.conn.execute(
            f"SELECT {LIST_COLUMNS} FROM jobs WHERE array_job_id=? AND array_task_id=?",
            (array_id, index),
        ).fetchone()
        if row is not None:
            return row
        row = self.conn.execute(
            f"SELECT {LIST_COLUMNS} FROM jobs WHERE job_id=? AND array_pending IS NOT NULL",
            (array_id,),
        ).fetchone()
        if row is None or not arrays.holds(arrays.parse(row["array_pending"]), index):
            raise NotFound(f"no array task {array_id}_{index}")
        return row

    def rows_of(self, ids: Iterable[int]) -> list[Row]:
        """The rows of exactly these jobs (no array's other tasks), with their specs."""
        wanted = list(ids)
        rows: list[Row] = []
        for start in range(0, len(wanted), 900):  # SQLite's bound on host parameters
            chunk = wanted[start : start + 900]
            rows += self.conn.execute(
                f"SELECT {LIST_COLUMNS}, {SPEC_COLUMN} FROM jobs "
                f"WHERE job_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ).fetchall()
        return rows

    def jobs(self, which: JobFilter, limit: int | None = None) -> list[Row]:
        """The jobs `which` selects (`job_where`), oldest first, at most `limit`; without
        the stored spec (`spec_of` needs `job()`)."""
        where, args = job_where(which)
        tail = f" LIMIT {int(limit)}" if limit else ""
        return self.conn.execute(
            f"SELECT {LIST_COLUMNS} FROM jobs {where} ORDER BY job_id{tail}", args
        ).fetchall()

    def count_jobs(self, *, states: Sequence[str], user: str, qos: str) -> int:
        """How many of `user`'s jobs of QoS `qos` are in one of `states`, each pending
        task of an array counted (as Slurm counts them against submit limits)."""
        marks = ",".join("?" * len(states))
        rows = self.conn.execute(
            f"""SELECT array_pending, COUNT(*) FROM jobs WHERE state IN ({marks}) AND user=?
                AND qos=? GROUP BY array_pending IS NULL, array_pending""",
            (*states, user, qos),
        ).fetchall()
        return sum(
            n if pending is None else n * arrays.count(arrays.parse(pending)) for pending, n in rows
        )

    def pending_brief(self, job_ids: Iterable[int] | None = None) -> list[Row]:
        """PENDING jobs (all, or those among `job_ids`) with what the scheduler reads of
        them: their brief, never the stored spec."""
        query = """SELECT job_id, user, name, account, partition, qos, submit_time, cpus,
                     mem_mb, gpus, nice, held, array_job_id, array_task_id, array_throttle,
                     time_limit_s,
                     exclude, brief, array_pending, elastic_state, expedite,
                     earlier_gpu_seconds, earlier_wait_seconds, queued_at FROM jobs
                   WHERE state='PENDING'"""
        if job_ids is None:
            return self.conn.execute(query).fetchall()
        wanted = list(job_ids)
        rows: list[Row] = []
        for start in range(0, len(wanted), 900):  # SQLite's bound on host parameters
            chunk = wanted[start : start + 900]
            rows += self.conn.execute(
                f"{query} AND job_id IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
        return rows

    def states_of(self, job_ids: Iterable[int]) -> dict[int, str]:
        """Map each existing job id (and array tasks of array ids) to its state."""
        wanted = list(job_ids)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        return {
            r["job_id"]: r["state"]
            for r in self.conn.execute(
                f"SELECT job_id, state FROM jobs WHERE job_id IN ({marks}) "
                f"OR array_job_id IN ({marks})",
                (*wanted, *wanted),
            )
        }

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


# A JobFilter's plain fields: each one given adds its clause, with its value as the
# clause's one parameter. States, which may be many, are `_state_clause`'s.
_FILTER_CLAUSES = (
    ("user", "user=?"),
    ("name", "name=?"),
    ("since", "(end_time IS NULL OR end_time >= ?)"),  # [since, until] overlaps the job
    ("until", "submit_time <= ?"),
)


def job_where(which: JobFilter) -> tuple[str, list[Any]]:
    """The WHERE clause (empty when it selects every job) and its parameters for the
    jobs `which` lists: its states (`JobFilter.listed_states`), user, name, and
    [since, until] overlap."""
    clauses: list[str] = []
    args: list[Any] = []
    states = which.listed_states()
    if states is not None:
        clauses.append(_state_clause(len(states), "COMPLETING" in states))
        args.extend(states)
    for field, clause in _FILTER_CLAUSES:
        if (value := getattr(which, field)) is not None:
            clauses.append(clause)
            args.append(value)
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), args


def _state_clause(count: int, completing: bool) -> str:
    """`state IN (?, ...)`; COMPLETING, which is no stored state, means the RUNNING
    rows whose end is given."""
    clause = f"state IN ({','.join('?' * count)})"
    return f"({clause} OR (state='RUNNING' AND ending IS NOT NULL))" if completing else clause
