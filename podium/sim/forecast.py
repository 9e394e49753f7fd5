"""When will each pending job start? The daemon's own scheduling code run forward on a
virtual clock from the cluster as it is now (pure: no I/O, no clock of its own).

From a `Snapshot` of now, passes run at each moment something changes: a running job
reaches its time limit and ends, or ends earlier where the progress it reports says
so (`Allocation.end_time`; a job with neither never ends here, so what waits behind it
gets no forecast, as Slurm's `squeue --start` says N/A), a pending job's
`--begin` time comes. Each pass is `sched.schedule` itself, with the same policy:
priority, backfill, limits, quotas and dependencies (a job that ends here ends
COMPLETED, so what depends on it may start). Started jobs hold their resources until
their own limit. Preemption victims end at once and are not requeued here, and elastic
jobs keep their size: a forecast is a plan, not a replay.

Bounded by `max_passes` and by `out_of_time` (asked between passes: the caller's
budget of real time, so that a queue of distinct shapes, which every pass walks in
full, costs a known time). Jobs not started within them get an estimate from the work
ahead of them and the capacity they can use (`podium.sim.forecast_bound`, `beyond`),
or the reason there is none. Every start it gives is finite."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from podium.sched import schedule
from podium.sched.model import Allocation, PendingJob, Policy, Snapshot
from podium.sched.order import PendingGroups, orders_by_limit, queue_order
from podium.sched.passed import PassedClock, pass_over
from podium.sim.forecast_bound import NEVER_FREE, Beyond, estimate_beyond


@dataclass(frozen=True)
class Expected:
    """A pending job's expected start: when, on which node, with which GPUs."""

    job_id: int
    start: float
    node: str
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True)
class Forecast:
    """The expected starts (by job id), how many passes ran, and the virtual time the
    last one ran at."""

    starts: dict[int, Expected]
    passes: int
    until: float
    # beyond the passes: an estimated start for each job they did not start, or why none
    # (podium.sim.forecast_bound)
    beyond: Beyond = field(default_factory=lambda: Beyond({}, {}))


def _end(alloc: Allocation) -> float:
    end = alloc.end_time()
    return math.inf if end is None else end


def forecast(
    snap: Snapshot,
    now: float,
    policy: Policy,
    max_passes: int = 100,
    out_of_time: Callable[[], bool] | None = None,
) -> Forecast:
    """Each pending job's expected start from `snap` at `now` under `policy` (see the
    module docstring), within `max_passes` passes, and no pass begun once
    `out_of_time()` says so (None: passes alone bound it)."""
    running = list(snap.running)
    pending: dict[int, PendingJob] = {p.job_id: p for p in snap.pending}
    groups = PendingGroups(orders_by_limit(policy))  # grouped: each pass walks it lazily
    passed = PassedClock()  # the wait guard's: later jobs started here pass earlier ones
    for queued in pending.values():
        groups.add(queued)
        passed.queued(queued.job_id, queued.submit_time, queued.passed_at)
    states = dict(snap.job_states)
    starts: dict[int, Expected] = {}
    t, ran_at, passes, synthetic = now, now, 0, -1
    while pending and passes < max_passes and not (passes and out_of_time and out_of_time()):
        view = replace(
            snap,
            running=tuple(running),
            pending=tuple(pending.values()),
            job_states=states,
            in_submit_order=False,
            groups=list(groups.groups.values()),
        )
        decisions = schedule(view, t, policy, explain=False)
        passes, ran_at = passes + 1, t
        victims = {p.job_id for p in decisions.preempts}
        running = [a for a in running if a.job_id not in victims]
        for start in decisions.starts:
            job = pending.get(start.job_id)
            if job is None:
                continue
            starts.setdefault(job.job_id, Expected(job.job_id, t, start.node, start.gpu_indices))
            job_id = job.job_id
            groups.remove(job)
            pass_over(pending, groups, passed.started(job_id, job.submit_time, t), t)
            if job.count > 1:  # an array's pending tasks: one starts, the rest wait
                pending[job_id] = replace(job, count=job.count - 1)
                groups.add(pending[job_id])
                passed.queued(job_id, job.submit_time, job.passed_at)  # the rest still wait
                job_id, synthetic = synthetic, synthetic - 1
            else:
                del pending[job_id]
            for node, gpus in start.placements:
                held = replace(job, job_id=job_id, cpus=start.cpus, mem_mb=start.mem_mb)
                running.append(held.allocate(node, gpus, t))
            states[job_id] = "RUNNING"
        # a job past its expected end (its limit being enforced, or slower than its
        # progress said) ends at once: the next pass runs at the same time without it
        later = [max(_end(a), t) for a in running if _end(a) != math.inf]
        later += [p.begin_time for p in pending.values() if p.begin_time and p.begin_time > t]
        t = min(later, default=math.inf)
        if t == math.inf:
            break
        ended = {a.job_id for a in running if _end(a) <= t}
        running = [a for a in running if a.job_id not in ended]
        states.update(dict.fromkeys(ended, "COMPLETED"))
    return Forecast(starts, passes, ran_at, _beyond(snap, policy, running, pending, t))


def _beyond(
    snap: Snapshot, policy: Policy, running: list[Allocation], pending: dict[int, PendingJob],
    t: float,
) -> Beyond:  # fmt: skip
    """Estimates for the jobs the passes left waiting, from virtual time `t` (infinite:
    nothing running ever ends, so none of them can start)."""
    if not pending:
        return Beyond({}, {})
    if t == math.inf:
        return Beyond({}, dict.fromkeys(pending, NEVER_FREE))
    view = replace(snap, running=tuple(running), pending=tuple(pending.values()), groups=None)
    order, _ = queue_order(view, t, policy, with_factors=False)
    rules = policy.las
    if rules is None:
        return estimate_beyond(snap.nodes, running, order, t)

    def due_of(job: PendingJob) -> float | None:
        """When `job` is overdue, taking one not passed yet as passed from `t`: in a
        queue this deep, later jobs start ahead of it."""
        return rules.overdue_at(job if job.passed_at is not None else replace(job, passed_at=t))

    return estimate_beyond(snap.nodes, running, order, t, due_of)


__all__ = ["Expected", "Forecast", "forecast"]
