"""Changes to one field of jobs rows: held, time limit, preemption mode, pending
reasons. Each public method is one transaction (see Database.transaction)."""

from __future__ import annotations

from collections.abc import Iterable

from podium.store.brief import SPEC_VALUE
from podium.store.database import Database


class JobChanges(Database):
    """Single-field updates of the jobs table."""

    def set_held(
        self, job_ids: Iterable[int], held: bool, now: float, by_admin: bool = False
    ) -> list[int]:
        """Hold or release PENDING jobs; returns those changed. A hold `by_admin` (an
        administrator's, of another user's job) is Slurm's admin hold: held=2, reason
        JobHeldAdmin; a user's is held=1, JobHeldUser."""
        done: list[int] = []
        level = (2 if by_admin else 1) if held else 0
        reason = {0: "None", 1: "JobHeldUser", 2: "JobHeldAdmin"}[level]
        with self.transaction(durable=True) as conn:
            for job_id in job_ids:
                cur = conn.execute(
                    "UPDATE jobs SET held=?, reason=? WHERE job_id=? AND state='PENDING'",
                    (level, reason, job_id),
                )
                if cur.rowcount == 1:
                    done.append(job_id)
                    self._event(conn, now, "hold" if held else "release", job_id=job_id)
        self._changed.update(done)
        return done

    def set_time_limit(self, job_id: int, seconds: int | None, who: str, now: float) -> bool:
        """A pending or running job's time limit (its column and its stored spec), with
        an event; False if the job has ended meanwhile."""
        with self.transaction(durable=True) as conn:
            # The array's other tasks keep the spec they shared with this one.
            conn.execute(
                """UPDATE jobs SET spec=(SELECT p.spec FROM jobs p WHERE p.job_id=?)
                   WHERE array_job_id=? AND spec=''""",
                (job_id, job_id),
            )
            cur = conn.execute(
                f"""UPDATE jobs SET time_limit_s=?, spec=json_set({SPEC_VALUE}, '$.time_limit_s', ?)
                   WHERE job_id=? AND state IN ('PENDING', 'RUNNING')""",
                (seconds, seconds, job_id),
            )
            if cur.rowcount == 1:
                limit = "unlimited" if seconds is None else f"{seconds}s"
                self._event(
                    conn, now, "update", job_id=job_id, detail=f"TimeLimit={limit} by {who}"
                )
        self._changed.add(job_id)
        return cur.rowcount == 1

    def set_nice(self, job_id: int, nice: int, who: str, now: float) -> bool:
        """A pending job's nice value (its column and its stored spec), with an event;
        False if the job is no longer pending."""
        with self.transaction(durable=True) as conn:
            conn.execute(  # the array's other tasks keep the spec they shared with this one
                """UPDATE jobs SET spec=(SELECT p.spec FROM jobs p WHERE p.job_id=?)
                   WHERE array_job_id=? AND spec=''""",
                (job_id, job_id),
            )
            cur = conn.execute(
                f"""UPDATE jobs SET nice=?, spec=json_set({SPEC_VALUE}, '$.nice', ?)
                   WHERE job_id=? AND state='PENDING'""",
                (nice, nice, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "update", job_id=job_id, detail=f"Nice={nice} by {who}")
        self._changed.add(job_id)
        return cur.rowcount == 1

    def set_preempt_mode(self, job_id: int, mode: str) -> None:
        """Record that a running job is being preempted and how it ends (requeue or
        cancel), so that a restarted daemon finishes the preemption the same way."""
        with self.transaction() as conn:
            conn.execute(
                "UPDATE jobs SET preempt_mode=? WHERE job_id=? AND state='RUNNING'", (mode, job_id)
            )

    def set_reasons(self, reasons: dict[int, str]) -> None:
        """Record why pending jobs wait (only rows whose reason changed are written)."""
        if not reasons:
            return
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE jobs SET reason=? WHERE job_id=? AND state='PENDING' AND reason<>?",
                [(r, j, r) for j, r in reasons.items()],
            )
