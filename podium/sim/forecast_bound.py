"""Beyond the exact forecast: an estimated start for every pending job the forecast's
passes did not reach (`podium.sim.forecast`), or the reason there is none.

The exact forecast runs the scheduler forward pass by pass, within a budget; in a deep
queue most jobs lie beyond it. For those, from the state where the passes stopped (the
virtual time `t`, what then runs and what still waits, in the queue's order), a fluid
model of the nodes the job fits:

- the *room* (GPUs for a job with GPUs, CPUs for a CPU-only job) frees as running jobs
  reach their ends (time limits, or the ends their progress says); what a job with no
  end holds is never freed;
- the *work ahead* is what each pending job before it in the queue asks of that
  resource over its time limit (resource-seconds);
- its estimate is the soonest time by which the room freed since `t` could have run
  all the work ahead, and room for its own request is free.

As if the cluster packed perfectly and every job ran to its limit: later arrivals,
jobs ending early and room split across nodes are not seen. Under least attained
service, a job that becomes overdue (its wait guard) goes before every job not due
before it: its estimate is the sooner of that place (from its due time, behind the
work due before it) and its place in the queue now.

Jobs get no estimate, with the reason said, when they are held, wait for a
dependency, fit no node, or wait behind a job with no time limit (its work is
unknown), or when what has no end holds the room they need.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from podium.sched.fit import could_ever_fit
from podium.sched.model import Allocation, NodeView, PendingJob

HELD = "held"
DEPENDENCY = "waits for a dependency"
NEVER_FITS = "fits no node"
NO_LIMIT = "behind a job with no time limit"
NEVER_FREE = "what it can use is held by jobs with no time limit"


@dataclass(frozen=True)
class Beyond:
    """Estimated starts (job id -> virtual time) and, for the others, why none."""

    estimates: dict[int, float]
    unknown: dict[int, str]


def _resource(job: PendingJob) -> str:
    return "gpu" if job.gpus > 0 else "cpu"


def _amount(job: PendingJob) -> float:
    """What `job` holds of its resource (all its nodes and like tasks)."""
    per_node = job.gpus if job.gpus > 0 else job.cpus
    return float(per_node * job.nodes)


def _held(alloc: Allocation, resource: str) -> float:
    return alloc.gpu_amount if resource == "gpu" else float(alloc.cpus)


def _size(job: PendingJob) -> int:
    """What `job` asks of its resource on one node: the room it needs free."""
    return job.gpus if job.gpus > 0 else job.cpus


def _counts(job: PendingJob, fits: bool) -> bool:
    """Whether `job` adds work ahead of the others (it may run: not held, no
    dependency, fits a node)."""
    return fits and not job.held and not job.dependencies


class _Ahead:
    """Work ahead by resource, and the first job ahead with no limit."""

    def __init__(self) -> None:
        self.work = {"gpu": 0.0, "cpu": 0.0}
        self.endless: dict[str, int] = {}

    def add(self, job: PendingJob) -> None:
        resource = _resource(job)
        if job.time_limit_s is None or not math.isfinite(job.time_limit_s):
            self.endless.setdefault(resource, job.job_id)
        else:
            self.work[resource] += _amount(job) * job.count * job.time_limit_s

    def upto(self, job: PendingJob) -> tuple[float, int | None]:
        """The work ahead in `job`'s resource, and the first job ahead with no limit
        in it (None: none)."""
        resource = _resource(job)
        return self.work[resource], self.endless.get(resource)


def _by_due(
    queue: Sequence[PendingJob],
    fits: dict[int, bool],
    due_of: Callable[[PendingJob], float | None],
) -> dict[int, tuple[float, int | None]]:
    """For each job with a due time (the wait guard), the work due before it in its
    resource (`_Ahead.upto`), in due order."""
    dated = sorted((d, j.job_id, j) for j in queue if (d := due_of(j)) is not None)
    ahead = _Ahead()
    got: dict[int, tuple[float, int | None]] = {}
    for _, job_id, job in dated:
        got[job_id] = ahead.upto(job)
        if _counts(job, fits[job_id]):
            ahead.add(job)
    return got


class _Timeline:
    """The room of one resource on the nodes a job fits, freed as running jobs end:
    `free[i]` from `times[i]` on, and `area[i]` the resource-seconds freed from the
    start to `times[i]` (what the jobs ahead can have used by then)."""

    def __init__(self, capacity: float, ends: list[tuple[float, float]], t: float) -> None:
        held = sum(amount for _, amount in ends)
        self.times, self.free, self.area = [t], [capacity - held], [0.0]
        for end, amount in sorted(ends):
            end = max(end, t)
            span = end - self.times[-1]
            self.area.append(self.area[-1] + span * self.free[-1])
            self.times.append(end)
            self.free.append(self.free[-1] + amount)

    def start(self, work: float, size: float) -> float | None:
        """The soonest time by which `work` resource-seconds could have run in the room
        freed and `size` is free (None: never)."""
        area, times, free = self.area, self.times, self.free
        at = bisect_left(area, work)  # the first breakpoint with that much room used
        if at == 0:
            when = times[0]
        elif at < len(area):
            i = at - 1  # within the span after breakpoint i, at its rate
            when = times[i] + (work - area[i]) / free[i] if free[i] > 0 else times[at]
        elif free[-1] > 0:  # past the last end: all the room is free
            when = times[-1] + (work - area[-1]) / free[-1]
        else:
            return None
        roomy = bisect_left(free, size)  # free only grows
        return None if roomy == len(free) else max(when, times[roomy])


def estimate_beyond(
    nodes: Sequence[NodeView],
    running: Iterable[Allocation],
    queue: Sequence[PendingJob],
    t: float,
    due_of: Callable[[PendingJob], float | None] | None = None,
) -> Beyond:
    """Estimated starts of the jobs of `queue` (pending, in the order a pass takes them)
    from virtual time `t` with `running` holding what it holds (see the module
    docstring). With `due_of` (least attained service's wait guard: when a job becomes
    overdue and goes before every job not due before it), a job's estimate is the
    sooner of its place in the queue now and its place among the jobs due before it,
    from its due time."""
    running = list(running)
    fitting = {j.job_id: [n for n in nodes if could_ever_fit(j, n)] for j in queue}
    lines: dict[tuple[str, frozenset[str]], _Timeline] = {}

    def line(resource: str, fits: list[NodeView]) -> _Timeline:
        names = frozenset(n.name for n in fits)
        key = (resource, names)
        if key not in lines:
            capacity = float(sum(len(n.gpus) if resource == "gpu" else n.cpus for n in fits))
            ends = []
            for alloc in running:
                if alloc.node not in names:
                    continue
                end = alloc.end_time()
                if end is None:
                    capacity -= _held(alloc, resource)
                else:
                    ends.append((end, _held(alloc, resource)))
            lines[key] = _Timeline(capacity, ends, t)
        return lines[key]

    due_ahead = (
        _by_due(queue, {k: bool(v) for k, v in fitting.items()}, due_of)
        if due_of is not None
        else {}
    )
    ahead = _Ahead()
    estimates: dict[int, float] = {}
    unknown: dict[int, str] = {}
    for job in queue:
        resource, fits = _resource(job), fitting[job.job_id]
        work, endless = ahead.upto(job)
        if job.held:
            unknown[job.job_id] = HELD
        elif job.dependencies:
            unknown[job.job_id] = DEPENDENCY
        elif not fits:
            unknown[job.job_id] = NEVER_FITS
        elif endless is not None:
            unknown[job.job_id] = f"{NO_LIMIT} (job {endless})"
        else:
            room = line(resource, fits)
            start = room.start(work, _size(job))
            due = due_of(job) if due_of is not None else None
            before = due_ahead.get(job.job_id)
            if start is not None and due is not None and before is not None and before[1] is None:
                then = room.start(before[0], _size(job))  # overdue by then: EDF
                if then is not None:
                    start = min(start, max(due, then))
            if start is None:
                unknown[job.job_id] = NEVER_FREE
            else:
                estimates[job.job_id] = (
                    start if job.begin_time is None else max(start, job.begin_time)
                )
        if _counts(job, bool(fits)):
            ahead.add(job)
    return Beyond(estimates, unknown)


__all__ = [
    "DEPENDENCY",
    "HELD",
    "NEVER_FITS",
    "NEVER_FREE",
    "NO_LIMIT",
    "Beyond",
    "estimate_beyond",
]
