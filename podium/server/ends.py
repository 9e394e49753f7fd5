"""A run's end: how a running job stands, and what its end means (recorded, charged to
fair share, requeued by auto-resume or preemption, or stopped for a fault).

Called by the reactor under its lock; side effects go through the reactor's Effects.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from podium.api.text import printable
from podium.config.cluster import ClusterConfig
from podium.errors import NotFound
from podium.jobspec.job import JobSpec, JobState
from podium.recover.resume import Ended, Verdict, decide, newest_checkpoint
from podium.run.executor import Poll
from podium.sched.accounting import requeued_after_preemption, run_usage
from podium.sched.config_policy import half_life_s
from podium.server.effects import Effects
from podium.server.job_rows import held_units
from podium.server.launch import Planner
from podium.server.running_specs import RunningSpecs
from podium.server.spare_refill import SpareRefill
from podium.store.db import Row, Store
from podium.store.resize_table import RESIZE, elastic_state
from podium.store.step_table import StepTable

log = logging.getLogger("podium.ends")


class RunEnds:
    """What the daemon knows of running jobs beyond their rows (their specs are
    `specs`'): cancels asked for, faults they were stopped for, leftovers being killed."""

    def __init__(
        self,
        store: Store,
        config: ClusterConfig,
        planner: Planner,
        effects: Effects,
        clock: Callable[[], float],
        specs: RunningSpecs,
    ) -> None:
        self.store = store
        self.specs = specs  # running jobs' specs, parsed once (shared with the reactor)
        self.config = config
        self.planner = planner
        self.effects = effects
        self.clock = clock
        self.half_life_s = half_life_s(config)
        self.job_failed_hooks: list[Callable[[list[int]], None]] = []  # GPUs of a failed run
        # told (job, the device units it held, its run's start and end) when a run is over
        self.run_over_hooks: list[Callable[[int, list[int], float, float], None]] = []
        self.steps = StepTable(store)
        self._cancel_requested: set[int] = set()
        self._killing: set[int] = set()  # ended jobs whose leftovers are being killed
        self._faulted: dict[int, tuple[str, int | None]] = {}  # job -> (reason, bad GPU)
        self._replaced: dict[int, tuple[float, int]] = {}  # job -> (run start, events noted)
        self.refill: SpareRefill | None = None  # set by the reactor

    def forget(self, job_id: int) -> None:
        """The job no longer runs here: drop what was kept for it."""
        self.specs.forget(job_id)

    def hold_broken(self, job_id: int, what: str, exc: BaseException) -> None:
        """Hold a job that broke its own start, with the reason; log it once. Other jobs
        are not affected: the pass goes on."""
        detail = printable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        reason = f"{what}: {detail}"[:500]
        log.error("job %s held: %s", job_id, reason)
        self.forget(job_id)
        self.store.hold_broken(job_id, reason, self.clock())

    def request_cancel(self, job_id: int) -> None:
        """A running job was cancelled: it shows COMPLETING (accounting: CANCELLED) at
        once, and its end is recorded CANCELLED once its processes are gone."""
        self._cancel_requested.add(job_id)
        self.store.mark_ending(job_id, JobState.CANCELLED, self.clock())
        self.effects.runs.cancel(job_id)

    def fail_jobs(self, job_ids: list[int], reason: str, gpu: int | None) -> None:
        """Stop jobs whose hardware failed: killed at once, they end NODE_FAIL with
        `reason` (and are requeued avoiding `gpu` if they asked for auto-resume)."""
        for job_id in job_ids:
            if job_id in self._faulted or job_id in self._cancel_requested:
                continue
            if gpu is not None and self._has_spares(job_id):
                # Its supervisor replaces the replica on `gpu`, or stops the job whole
                # (NODE_FAIL, and its fault note says why): nothing to mark here.
                self.effects.runs.fail(job_id, reason, gpu, replace=True)
                log.warning("job %s: replacing the replica on GPU %s: %s", job_id, gpu, reason)
                continue
            self._faulted[job_id] = (reason, gpu)
            if not self.effects.runs.fail(job_id, reason, gpu):
                log.warning("job %s: no supervisor to stop for %s", job_id, reason)
            log.warning("job %s stopped: %s", job_id, reason)

    def _has_spares(self, job_id: int) -> bool:
        """Whether a running job was started with spares (--spares)."""
        try:
            row = self.store.job(job_id)
        except NotFound:
            return False
        elastic = self.specs.of(row).elastic
        return elastic is not None and elastic.spares > 0

    def collect(self, row: Row) -> str:
        """Record how a running job stands. Its GPUs, CPUs and memory stay held until
        none of its processes is left: a job whose supervisor vanished has its
        leftovers killed first, and stays RUNNING while any survives. Once the run's
        end is recorded, its runtime state (the job's directory) is let go.

        Returns "adopted" (it runs on), "ended", "requeued", "relaunch" (it never
        started: queued again) or "lost"."""
        job_id = row["job_id"]
        poll = self.effects.runs.poll(job_id)
        self._note_replacements(row)
        if poll.status == "running":
            return "adopted"
        status = self._record(row, poll)
        if status != "adopted":
            self._replaced.pop(job_id, None)
            self.effects.runs.forget(job_id)
            units = held_units(row)
            if units and self.run_over_hooks and row["start_time"] is not None:
                end = poll.result.end_time if poll.result is not None else self.clock()
                for hook in self.run_over_hooks:
                    hook(job_id, units, float(row["start_time"]), float(end))
        return status

    def _note_replacements(self, row: Row) -> None:
        """Record, as `replace` events, the replicas a job with spares had replaced
        since the last look (its supervisor's record lives only as long as the run)."""
        elastic = self.specs.of(row).elastic
        if elastic is None or not elastic.spares:
            return
        job_id, start = row["job_id"], float(row["start_time"] or 0.0)
        done = self.effects.runs.replacements(job_id)
        seen = self._replaced.get(job_id)
        if seen is None or seen[0] != start:  # a first look at this run (or a restart)
            stored = [e for e in self.store.events(job_id) if e["kind"] == "replace"]
            seen = (start, sum(e["time"] >= start for e in stored))
        for told in done[seen[1] :]:
            keep = ("generation", "replaced", "gpus_from", "gpus_to", "spare", "warm", "reason")
            detail = json.dumps({k: told.get(k) for k in keep})
            when = float(told.get("time") or self.clock())
            self.store.event(when, "replace", job_id=job_id, detail=detail)
            log.warning("job %s: replaced a replica: %s", job_id, detail)
        self._replaced[job_id] = (start, max(seen[1], len(done)))
        dropped = self.effects.runs.dropped_spares(job_id)
        if (done or dropped) and self.refill is not None:
            self.refill.check(row, elastic, done, self.clock(), dropped)

    def _record(self, row: Row, poll: Poll) -> str:
        """collect() for a run no supervisor holds any more."""
        job_id = row["job_id"]
        now = self.clock()
        if poll.status in ("ended", "vanished"):
            left = self.effects.runs.kill_leftovers(job_id, scan_session=poll.status == "vanished")
            if left:
                if job_id not in self._killing:
                    self._killing.add(job_id)
                    log.warning("job %s: %d leftover process(es) still alive", job_id, left)
                    self.store.event(
                        now, "leftovers", job_id=job_id, detail=f"{left} process(es) alive"
                    )
                return "adopted"
            self._killing.discard(job_id)
        if poll.status == "ended" and poll.result is not None:
            res = poll.result
            resizes = elastic_state(row).get("resizes") or ()
            self.steps.put(job_id, row["restart_count"] + len(resizes), res.steps)
            self._charge(row, res.end_time)
            if res.state == JobState.PREEMPTED.value:
                cause = "resize" if row["preempt_mode"] == RESIZE else "preemption"
                self._note_lost(row, cause, res.end_time, None)
            if res.state == JobState.PREEMPTED.value and row["preempt_mode"] == RESIZE:
                ran = self._run_gpu_seconds(row, res.end_time)
                self.store.requeue_resized(job_id, now, ran)  # it starts again at its new size
                self.specs.forget(job_id)
                return "requeued"
            if res.state == JobState.PREEMPTED.value and requeued_after_preemption(
                row["preempt_mode"], self.specs.of(row).requeue
            ):
                ran = self._run_gpu_seconds(row, res.end_time)
                self.store.requeue(job_id, now, "preempted", ran_gpu_seconds=ran)
                self.effects.notify(
                    row, self.specs.of(row), "REQUEUE", "was preempted and requeued"
                )
                self.specs.forget(job_id)
                return "requeued"
            return self._end_or_resume(
                row, res.state, res.exit_code, res.signal, res.end_time, res.reason, res.fault
            )
        if job_id in self._cancel_requested:
            if row["preempt_mode"] == RESIZE:
                self.store.drop_resize(job_id, "the job was cancelled", now)
            self.store.mark_ended(
                job_id, state=JobState.CANCELLED, exit_code=None, signal=None, end_time=now
            )
            self._cancel_requested.discard(job_id)
            self.specs.forget(job_id)
            return "ended"
        if poll.status == "unlaunched":
            self.store.requeue_unlaunched(job_id, now)
            self.specs.forget(job_id)
            return "relaunch"
        why = "supervisor vanished"
        if poll.status == "lost":
            why = "its run was lost: the machine restarted while it ran"
        self._end_or_resume(row, JobState.NODE_FAIL.value, None, None, now, why, "node")
        return "lost"

    def _end_or_resume(
        self,
        row: Row,
        state: str,
        exit_code: int | None,
        sig: int | None,
        end_time: float,
        reason: str,
        fault: str | None,
    ) -> str:
        """Record how a run ended; requeue it instead when auto-resume says so.

        A run stopped because its GPU or node was fenced ends NODE_FAIL with the health
        reason; requeued, it avoids that GPU while the GPU is unhealthy. A resize it
        was stopping for is dropped: the run ended otherwise.
        """
        job_id = row["job_id"]
        if row["preempt_mode"] == RESIZE:
            self.store.drop_resize(job_id, f"the run ended {state}", end_time)
        faulted = self._faulted.pop(job_id, None)
        if faulted is None and fault == "node":  # stopped by a daemon that since restarted
            faulted = self.effects.runs.fault_note(job_id)
        bad_gpu = None
        if faulted is not None:
            reason, bad_gpu = faulted
            state = JobState.NODE_FAIL.value
        spec = self.specs.of(row)
        if state in (JobState.FAILED.value, JobState.NODE_FAIL.value):
            newest = newest_checkpoint(self.planner.checkpoint_dir(row["job_id"], spec))
            if state == JobState.NODE_FAIL.value or fault is not None:
                self._note_lost(row, "fault", end_time, newest)
            verdict = self._verdict(row, spec, state, exit_code, sig, newest, faulted, fault)
            if faulted is None:
                gpus = sorted({self.planner.node.parent_of(g) for g in held_units(row)})
                for hook in self.job_failed_hooks:
                    hook(gpus)  # the physical GPUs (a slice's or a share's GPU)
            if verdict.requeue:
                self._requeue(row, spec, state, reason, verdict, bad_gpu, newest, end_time)
                return "requeued"
            if spec.auto_resume > 0:
                reason = f"{reason}; not requeued: {verdict.reason}"
        self.store.mark_ended(
            job_id,
            state=JobState(state),
            exit_code=exit_code,
            signal=sig,
            end_time=end_time,
            reason=reason,
        )
        self._cancel_requested.discard(job_id)
        self.specs.forget(job_id)
        kind = "END" if state == JobState.COMPLETED.value else "FAIL"
        if state == JobState.TIMEOUT.value:
            kind = "TIME_LIMIT"
        self.effects.notify(row, spec, kind, f"ended {state}")
        return "ended"

    def _verdict(
        self,
        row: Row,
        spec: JobSpec,
        state: str,
        exit_code: int | None,
        sig: int | None,
        newest: float | None,
        faulted: tuple[str, int | None] | None,
        fault: str | None,
    ) -> Verdict:
        """Whether auto-resume requeues a run that ended FAILED or NODE_FAIL."""
        before = row["checkpoint_mtime"]
        return decide(
            Ended(
                state=state,
                exit_code=exit_code,
                signal=sig,
                fault=fault is not None or faulted is not None,
                auto_resume=spec.auto_resume,
                restart_count=row["restart_count"],
                requeue_exit_codes=spec.requeue_exit_codes,
                no_requeue_exit_codes=spec.no_requeue_exit_codes,
                stalled_restarts=row["stalled_restarts"],
                progressed=newest is not None and (before is None or newest > before),
                max_stalled=self.config.resume.max_restarts_without_progress,
            )
        )

    def _requeue(
        self,
        row: Row,
        spec: JobSpec,
        state: str,
        reason: str,
        verdict: Verdict,
        bad_gpu: int | None,
        newest: float | None,
        end_time: float,
    ) -> None:
        """Requeue the job for another run, avoiding `bad_gpu` (fenced) on its node."""
        job_id = row["job_id"]
        exclude = [tuple(e) for e in json.loads(row["exclude"] or "[]")]
        if bad_gpu is not None and (row["node"], bad_gpu) not in exclude:
            exclude.append((row["node"], bad_gpu))
        self.store.requeue(
            job_id,
            self.clock(),
            f"{state}: {reason}; {verdict.reason}",
            exclude=[(str(n), int(g)) for n, g in exclude],
            checkpoint_mtime=newest,
            stalled_restarts=verdict.stalled_restarts,
            ran_gpu_seconds=self._run_gpu_seconds(row, end_time),
            expedite=True,  # the job that failed restarts first (podium.sched.order)
        )
        self.effects.notify(row, spec, "REQUEUE", f"ended {state} and was requeued")
        self.specs.forget(job_id)
        log.info("job %s %s (%s): requeued, %s", job_id, state, reason, verdict.reason)

    def _note_lost(self, row: Row, cause: str, end_time: float, newest: float | None) -> None:
        """Record the GPU-seconds a run stopped for `cause` lost: its GPUs times the time
        from its newest checkpoint of this run (a file in its checkpoint directory, or a
        `podium checkpoint`), or from its start, to its end. A run that saved after it
        was asked to stop (preempted or resized) answered the contract and lost
        nothing: the seconds it then took to leave are the stop's cost, not work it
        must do again."""
        start = row["start_time"]
        if start is None:
            return
        if newest is None:
            newest = newest_checkpoint(
                self.planner.checkpoint_dir(row["job_id"], self.specs.of(row))
            )
        events = self.store.events(row["job_id"])
        told = [e["time"] for e in events if e["kind"] == "checkpoint"]
        saves = [t for t in (newest, *told) if t is not None and start < t <= end_time]
        since = max([start, *saves])
        asked = self._stop_asked(row, events) if cause != "fault" else None
        if asked is not None and since >= asked:
            since = end_time
        gpus = self._gpus_weight(row)
        if gpus:
            self.store.add_lost(row["job_id"], cause, gpus * max(0.0, end_time - since), end_time)

    @staticmethod
    def _stop_asked(row: Row, events: list[Row]) -> float | None:
        """When the daemon asked this run to stop for a resize or a preemption (None
        when it does not know)."""
        if row["preempt_mode"] == RESIZE:
            asked = (elastic_state(row).get("resizing") or {}).get("time")
            return float(asked) if isinstance(asked, int | float) else None
        times = [
            e["time"]
            for e in events
            if e["kind"] in ("preempting", "requeue") and e["time"] >= row["start_time"]
        ]
        return max(times, default=None)

    def _gpus_weight(self, row: Row) -> float:
        """What the GPUs a run holds weigh in GPUs (parts of GPUs by their share)."""
        held = held_units(row)
        units = self.planner.node.gpu_units(held)
        return len(held) if units is None else units

    def _run_gpu_seconds(self, row: Row, end_time: float) -> float:
        """The GPU-seconds of a run that ended at `end_time` (0 for one never started)."""
        start = row["start_time"]
        return 0.0 if start is None else self._gpus_weight(row) * max(0.0, end_time - start)

    def _charge(self, row: Row, end_time: float) -> None:
        """Add a finished run's GPU-seconds (and weighted CPU-seconds) to fair share."""
        if row["start_time"] is None:
            return
        amount = run_usage(
            end_time - row["start_time"],
            self._gpus_weight(row),
            row["cpus"],
            self.config.fairshare.cpu_weight,
        )
        self.store.charge(row["account"], row["user"], amount, end_time, self.half_life_s)
