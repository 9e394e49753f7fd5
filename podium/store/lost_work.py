"""The work each job lost, by cause: GPU-seconds between its last checkpoint and the
end of a run that was stopped for a preemption, a resize or a fault (`lost_work`
column, JSON: cause -> GPU-seconds). Each public method is one transaction."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from podium.store.database import Database


def lost_work(row: sqlite3.Row | Mapping[str, Any]) -> dict[str, float]:
    """A row's lost GPU-seconds by cause ({} for none, or unreadable)."""
    try:
        data = json.loads(row["lost_work"] or "{}")
    except (ValueError, TypeError, KeyError, IndexError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)}


class JobLosses(Database):
    """Lost work of jobs' runs."""

    def add_lost(self, job_id: int, cause: str, gpu_seconds: float, now: float) -> None:
        """Add `gpu_seconds` lost to `cause` (one of api.goodput_sums.LOSS_CAUSES) for `job_id`,
        with an event."""
        with self.transaction() as conn:
            row = conn.execute("SELECT lost_work FROM jobs WHERE job_id=?", (job_id,)).fetchone()
            if row is None:
                return
            lost = lost_work(row)
            lost[cause] = round(lost.get(cause, 0.0) + max(0.0, gpu_seconds), 3)
            conn.execute("UPDATE jobs SET lost_work=? WHERE job_id=?", (json.dumps(lost), job_id))
            self._event(
                conn, now, "lost", job_id=job_id, detail=f"{cause}: {gpu_seconds:.1f} GPU-s"
            )
