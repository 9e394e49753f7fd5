"""A job's runs: PENDING -> RUNNING -> an end, requeues, holds of broken jobs,
cancels of pending ones, the GPU memory a run used. Each public method is one
transaction (see Database.transaction), with its event."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from podium.jobspec.job import JobState
from podium.store.database import Database
from podium.store.schema import ADD_STAY_WAIT


@dataclass(frozen=True)
class RunningStart:
    """What `mark_running` records for one job: where it runs and its output files."""

    job_id: int
    node: str
    units: tuple[int, ...]  # device units held (Grant.units): the row's gpu_ids column
    cpus: int
    mem_mb: int
    stdout: str
    stderr: str
    cpu_ids: tuple[int, ...] = ()


class JobRuns(Database):
    """The transitions of the jobs table's rows from one run to the next."""

    def swap_units(self, job_id: int, units: Sequence[int], detail: str, now: float) -> bool:
        """A running job now holds `units` (its spares refilled, a fenced GPU given
        back), with an event saying so. False when it no longer runs."""
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET gpu_ids=? WHERE job_id=? AND state='RUNNING'",
                (json.dumps(list(units)), job_id),
            )
            if cur.rowcount != 1:
                return False
            self._event(conn, now, "spares", job_id=job_id, detail=detail)
        return True

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
                         stdout=?, stderr=?, exit_code=NULL, signal=NULL, preempt_mode=NULL,
                         elastic_state=json_remove(elastic_state, '$.cap'), expedite=0
                       WHERE job_id=? AND state='PENDING'""",
                    (
                        now,
                        s.node,
                        json.dumps(list(s.units)),
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
        self._changed.update(done)
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
                """UPDATE jobs SET state=?, exit_code=?, signal=?, end_time=?, reason=?,
                     ending=NULL WHERE job_id=? AND state='RUNNING'""",
                (state.value, exit_code, signal, end_time, reason, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, end_time, "end", job_id=job_id, detail=state.value)
        self._changed.add(job_id)
        return cur.rowcount == 1

    def mark_ending(self, job_id: int, state: JobState, now: float) -> bool:
        """A RUNNING job is given its end (`state`, CANCELLED) while its processes are
        stopped: listings show it COMPLETING, accounting `state`, until `mark_ended`
        records how it ended. False if the job was not RUNNING."""
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET ending=? WHERE job_id=? AND state='RUNNING'",
                (state.value, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "ending", job_id=job_id, detail=state.value)
        self._changed.add(job_id)
        return cur.rowcount == 1

    def requeue_unlaunched(self, job_id: int, now: float) -> None:
        """RUNNING -> PENDING for a job whose supervisor never started (crash window)."""
        with self.transaction() as conn:
            conn.execute(
                """UPDATE jobs SET state='PENDING', reason='None', start_time=NULL, node=NULL,
                     gpu_ids=NULL, ending=NULL WHERE job_id=? AND state='RUNNING'""",
                (job_id,),
            )
            self._event(conn, now, "relaunch", job_id=job_id, detail="supervisor never started")
        self._changed.add(job_id)

    def requeue(
        self,
        job_id: int,
        now: float,
        why: str,
        *,
        exclude: Sequence[tuple[str, int]] | None = None,
        checkpoint_mtime: float | None = None,
        stalled_restarts: int | None = None,
        ran_gpu_seconds: float = 0.0,
        expedite: bool = False,
    ) -> bool:
        """RUNNING -> PENDING again (preempted or failed node), restart count raised.

        The job keeps its id, submit time and checkpoint directory. `exclude` replaces
        the (node, GPU) pairs it must avoid; the progress fields are auto-resume's;
        `ran_gpu_seconds`, the run's GPU-seconds, joins its earlier runs', and the wait
        before the run joins its earlier waits (`earlier_wait_seconds`). `expedite`: it
        goes first in the queue (a restart after a failure; a preempted job does not).
        """
        with self.transaction(durable=True) as conn:
            cur = conn.execute(
                f"""UPDATE jobs SET state='PENDING', reason='None', start_time=NULL,
                     end_time=NULL, node=NULL, gpu_ids=NULL, exit_code=NULL, signal=NULL,
                     ending=NULL, restart_count=restart_count + 1,
                     earlier_gpu_seconds=earlier_gpu_seconds + ?,
                     {ADD_STAY_WAIT},
                     exclude=COALESCE(?, exclude),
                     checkpoint_mtime=COALESCE(?, checkpoint_mtime),
                     stalled_restarts=COALESCE(?, stalled_restarts), expedite=?,
                     queued_at=?
                   WHERE job_id=? AND state='RUNNING'""",
                (
                    max(0.0, ran_gpu_seconds),
                    now,
                    None if exclude is None else json.dumps([list(e) for e in exclude]),
                    checkpoint_mtime,
                    stalled_restarts,
                    int(expedite),
                    now,
                    job_id,
                ),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "requeue", job_id=job_id, detail=why)
        self._changed.add(job_id)
        return cur.rowcount == 1

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
        self._changed.update(done)
        return done

    def hold_broken(self, job_id: int, reason: str, now: float) -> bool:
        """Put a job that cannot be planned or launched back to PENDING, held, with
        `reason` (whatever it was: pending, or recorded RUNNING but never launched).
        Returns False if the job had already ended."""
        with self.transaction(durable=True) as conn:
            cur = conn.execute(
                """UPDATE jobs SET state='PENDING', held=1, reason=?, start_time=NULL,
                     node=NULL, gpu_ids=NULL, ending=NULL
                   WHERE job_id=? AND state IN ('PENDING','RUNNING')""",
                (reason, job_id),
            )
            if cur.rowcount == 1:
                self._event(conn, now, "hold", job_id=job_id, detail=reason)
        self._changed.add(job_id)
        return cur.rowcount == 1

    def raise_gpu_memory(self, peaks: dict[int, int]) -> None:
        """Keep each running job's GPU memory high-water mark (MiB): the larger of the
        stored one and this sample's."""
        if not peaks:
            return
        with self.transaction() as db:
            db.executemany(
                "UPDATE jobs SET gpu_mem_peak_mb = MAX(COALESCE(gpu_mem_peak_mb, 0), ?) "
                "WHERE job_id = ?",
                [(mib, job_id) for job_id, mib in peaks.items()],
            )


__all__ = ["JobRuns", "RunningStart"]
