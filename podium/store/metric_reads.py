"""What /metrics reads from the store, summed by SQLite where it can be (a scrape with
10,000 jobs must not fetch 10,000 rows): jobs counted by state and by partition, user,
account or QoS, pending jobs by reason, the running jobs themselves, the wait histogram,
and events counted by kind and detail (requeues and resizes, by cause). Never a spec."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from podium.store.database import Database

RUNNING_COLUMNS = (
    "job_id, user, account, partition, qos, start_time, end_time, gpu_ids, cpus, mem_mb, "
    "lost_work, earlier_gpu_seconds, ending"
)
GROUP_COLUMNS = ("partition", "user", "account", "qos")  # job_counts' first four
# The jobs metrics count: pending and running, and those ended after a given time.
_COUNTED = "(state IN ('PENDING','RUNNING') OR end_time >= ?)"


class MetricReads(Database):
    """Reads for the metrics endpoint (no writes)."""

    def job_counts(self, ended_after: float) -> list[tuple[Any, ...]]:
        """(partition, user, account, qos, state, held, ending, jobs) of the counted
        jobs: one scan, summed by SQLite."""
        return [
            tuple(r)
            for r in self.conn.execute(
                "SELECT partition, user, account, qos, state, held, ending IS NOT NULL, "
                f"count(*) FROM jobs WHERE {_COUNTED} GROUP BY 1, 2, 3, 4, 5, 6, 7",
                (ended_after,),
            )
        ]

    def pending_reasons(self) -> list[tuple[str, int]]:
        """(reason, jobs) of the pending jobs."""
        return [
            (r[0] or "None", int(r[1]))
            for r in self.conn.execute(
                "SELECT reason, count(*) FROM jobs WHERE state='PENDING' GROUP BY 1"
            )
        ]

    def running_jobs(self) -> list[sqlite3.Row]:
        """The running jobs' columns that metrics read."""
        return list(self.conn.execute(f"SELECT {RUNNING_COLUMNS} FROM jobs WHERE state='RUNNING'"))

    def wait_buckets(self, bounds: Sequence[float]) -> tuple[list[int], int, float]:
        """Of the jobs that have started (their run now or their last): how many waited
        at most each bound from submit to start, how many in all, and the sum."""
        cases = ", ".join(f"sum(w <= {float(b)!r})" for b in bounds)
        row = self.conn.execute(
            f"SELECT {cases}, count(*), total(w) FROM (SELECT max(0.0, start_time - "
            "submit_time) AS w FROM jobs WHERE start_time IS NOT NULL)"
        ).fetchone()
        counts = [int(v or 0) for v in row[: len(bounds)]]
        return counts, int(row[len(bounds)]), float(row[len(bounds) + 1])

    def lost_and_charged(self) -> list[sqlite3.Row]:
        """Every started job's lost work (JSON) and the GPU-seconds of its earlier runs,
        with its current run's start, end and GPUs: what goodput is made of."""
        return list(
            self.conn.execute(
                "SELECT job_id, user, start_time, end_time, gpu_ids, lost_work, "
                "earlier_gpu_seconds FROM jobs WHERE start_time IS NOT NULL "
                "OR earlier_gpu_seconds > 0"
            )
        )

    def event_details(self, kinds: tuple[str, ...]) -> list[tuple[str, str, int]]:
        """(kind, detail, count) for the events of `kinds`."""
        marks = ",".join("?" * len(kinds))
        return [
            (r[0], r[1] or "", int(r[2]))
            for r in self.conn.execute(
                f"SELECT kind, detail, count(*) FROM events WHERE kind IN ({marks}) "
                "GROUP BY kind, detail",
                kinds,
            )
        ]


__all__ = ["GROUP_COLUMNS", "RUNNING_COLUMNS", "MetricReads"]
