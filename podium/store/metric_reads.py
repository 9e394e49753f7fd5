"""What /metrics reads from the store in one go: the columns of jobs that are pending,
running, or ended recently (never the stored spec), and counts of events by kind and
their detail (requeues and resizes, by cause)."""

from __future__ import annotations

import sqlite3

from podium.store.database import Database

METRIC_COLUMNS = (
    "job_id, user, account, partition, qos, state, reason, held, submit_time, start_time, "
    "end_time, node, gpus, gpu_ids, cpus, mem_mb, restart_count, lost_work, "
    "earlier_gpu_seconds, ending"
)


class MetricReads(Database):
    """Reads for the metrics endpoint (no writes)."""

    def metric_jobs(self, ended_after: float) -> list[sqlite3.Row]:
        """Jobs pending or running, and those that ended after `ended_after`."""
        return list(
            self.conn.execute(
                f"SELECT {METRIC_COLUMNS} FROM jobs WHERE state IN ('PENDING','RUNNING') "
                "OR end_time >= ?",
                (ended_after,),
            )
        )

    def started_waits(self) -> list[float]:
        """Seconds from submit to start of every job that has started (its run now or
        its last one), for the wait histogram."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT start_time - submit_time FROM jobs WHERE start_time IS NOT NULL"
            )
        ]

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


__all__ = ["METRIC_COLUMNS", "MetricReads"]
