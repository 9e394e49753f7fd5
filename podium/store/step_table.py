"""The steps table: each run's batch step and srun steps, as the supervisor reported
them (podium.run.steps), kept for `podium acct` as sacct keeps steps."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from podium.store.db import Row, Store


class StepTable:
    """Step records, stored beside the jobs in the same database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def put(self, job_id: int, run: int, steps: Iterable[dict[str, Any]]) -> None:
        """Record the steps of run `run` (the job's restart count) of `job_id` (one
        commit; a step recorded again replaces the old record)."""
        rows = [
            (
                job_id,
                run,
                str(s["step_id"]),
                str(s.get("name") or ""),
                str(s["state"]),
                s.get("exit_code"),
                s.get("signal"),
                s.get("start_time"),
                s.get("end_time"),
                int(s.get("ntasks") or 0),
                str(s.get("node") or ""),
                json.dumps(list(s.get("gpus") or [])),
            )
            for s in steps
        ]
        if not rows:
            return
        with self.store.transaction() as conn:
            conn.executemany(
                """INSERT OR REPLACE INTO steps (job_id, run, step_id, name, state, exit_code,
                   signal, start_time, end_time, ntasks, node, gpu_ids)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                rows,
            )

    def of_jobs(self, job_ids: Iterable[int]) -> dict[int, list[Row]]:
        """The steps of each job's latest recorded run, the batch step first, then by
        step number."""
        ids = list(job_ids)
        found: dict[int, list[Row]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self.store.conn.execute(
                f"""SELECT * FROM steps s WHERE job_id IN ({marks}) AND run =
                      (SELECT MAX(run) FROM steps WHERE job_id = s.job_id)""",
                chunk,
            ).fetchall()
            for r in rows:
                found.setdefault(r["job_id"], []).append(r)
        for steps in found.values():
            steps.sort(key=lambda r: (r["step_id"] != "batch", _number(r["step_id"])))
        return found


def _number(step_id: str) -> int:
    return int(step_id) if step_id.isdigit() else -1
