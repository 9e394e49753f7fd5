"""An elastic job's resizes in the jobs table (`elastic_state`, JSON):

- `resizing`: the resize under way ({"from", "to", "cause", "time"}), set when the pass
  decides it and the job's preempt mode becomes "resize" (both survive a restart);
- `cap`: the most replicas its next start may take (the size the resize chose), until
  it starts;
- `resizes`: those done, oldest first, each with the time it was requeued ("done").

Each public method is one transaction (see Database.transaction).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from podium.store.database import Database
from podium.store.schema import ADD_STAY_WAIT

RESIZE = "resize"  # the preempt mode of a job being resized
MAX_KEPT = 1000  # resizes kept per job (the newest)


def elastic_state(row: sqlite3.Row | Mapping[str, Any]) -> dict[str, Any]:
    """A row's elastic state ({} for a job never resized, or unreadable)."""
    try:
        data = json.loads(row["elastic_state"] or "{}")
    except (ValueError, TypeError, KeyError, IndexError):
        return {}
    return data if isinstance(data, dict) else {}


class JobResizes(Database):
    """Resizes of elastic jobs."""

    def start_resize(self, job_id: int, replicas: int, to: int, cause: str, now: float) -> bool:
        """Mark a RUNNING job as being resized from `replicas` to `to`; False when it
        is not running or already being stopped."""
        with self.transaction(durable=True) as conn:
            row = conn.execute(
                "SELECT elastic_state FROM jobs WHERE job_id=? AND state='RUNNING' "
                "AND preempt_mode IS NULL",
                (job_id,),
            ).fetchone()
            if row is None:
                return False
            state = elastic_state(row)
            state["resizing"] = {"from": replicas, "to": to, "cause": cause, "time": now}
            conn.execute(
                "UPDATE jobs SET preempt_mode=?, elastic_state=? WHERE job_id=?",
                (RESIZE, json.dumps(state), job_id),
            )
            self._event(conn, now, "resizing", job_id=job_id, detail=cause)
        return True

    def requeue_resized(self, job_id: int, now: float, ran_gpu_seconds: float = 0.0) -> bool:
        """RUNNING -> PENDING after a resize stopped it: its restart count is kept, the
        resize is recorded as done, and its next start takes `to` replicas at most;
        `ran_gpu_seconds`, the run's GPU-seconds, joins its earlier runs', and the wait
        before the run its earlier waits; it joins the queue again now (`queued_at`)."""
        with self.transaction(durable=True) as conn:
            row = conn.execute(
                "SELECT elastic_state FROM jobs WHERE job_id=? AND state='RUNNING'", (job_id,)
            ).fetchone()
            if row is None:
                return False
            state = elastic_state(row)
            resizing = state.pop("resizing", None) or {}
            done = [*state.get("resizes", []), {**resizing, "done": now}][-MAX_KEPT:]
            state.update(resizes=done, cap=resizing.get("to"))
            conn.execute(
                f"""UPDATE jobs SET state='PENDING', reason='None', start_time=NULL,
                     end_time=NULL, node=NULL, gpu_ids=NULL, exit_code=NULL, signal=NULL,
                     ending=NULL, preempt_mode=NULL, elastic_state=?,
                     earlier_gpu_seconds=earlier_gpu_seconds + ?,
                     {ADD_STAY_WAIT},
                     queued_at=?
                   WHERE job_id=? AND state='RUNNING'""",
                (json.dumps(state), max(0.0, ran_gpu_seconds), now, now, job_id),
            )
            detail = resizing.get("cause", "resized")
            self._event(conn, now, "resize", job_id=job_id, detail=detail)
        self._changed.add(job_id)
        return True

    def drop_resize(self, job_id: int, why: str, now: float) -> bool:
        """Forget the resize a run was stopping for, when the run ended otherwise (a
        fault, a failure, a cancel): the resize never happened, its event says why.
        False when no resize was open."""
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT elastic_state FROM jobs WHERE job_id=?", (job_id,)
            ).fetchone()
            if row is None:
                return False
            state = elastic_state(row)
            resizing = state.pop("resizing", None)
            if not resizing:
                return False
            conn.execute(
                "UPDATE jobs SET elastic_state=? WHERE job_id=?", (json.dumps(state), job_id)
            )
            detail = f"{resizing.get('from')}->{resizing.get('to')} dropped: {why}"
            self._event(conn, now, "resize dropped", job_id=job_id, detail=detail)
        self._changed.add(job_id)
        return True
