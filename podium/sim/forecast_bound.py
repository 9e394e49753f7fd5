"""Beyond the exact forecast: an estimated start for every pending job the forecast's
passes did not reach (`podium.sim.forecast`), or the reason there is none.

The exact forecast runs the scheduler forward pass by pass, within a budget; in a deep
queue most jobs lie beyond it. For those, from the state where the passes stopped (the
virtual time `t`, what then runs and what still waits, in the queue's order):

    estimate = t + (work ahead of the job) / (the capacity its shape can use)

- *Work* is in the job's own resource: GPU-seconds for a job with GPUs, CPU-seconds
  for a CPU-only job. The work ahead is what running jobs hold until their ends (time
  limit, or the end their progress says) and what each pending job before it in the
  queue asks for over its time limit, as if the cluster packed the queue perfectly and
  every job ran to its limit. Later arrivals and jobs ending early are not seen.
- *Capacity* is the GPUs (CPUs) of the nodes the job fits when they are empty, less
  what running jobs with no end hold there.

It is an estimate, not a promise: backfill may start a job sooner, and fragmentation
(room split across nodes) later. Jobs get no estimate, with the reason said, when they
are held, wait for a dependency, fit no node, or wait behind a job with no time limit
(its work is unknown), or when what has no end holds all the capacity they can use.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
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


def estimate_beyond(
    nodes: Sequence[NodeView],
    running: Iterable[Allocation],
    queue: Sequence[PendingJob],
    t: float,
) -> Beyond:
    """Estimated starts of the jobs of `queue` (pending, in the order a pass takes them)
    from virtual time `t` with `running` holding what it holds (see the module
    docstring)."""
    ahead = {"gpu": 0.0, "cpu": 0.0}  # work ahead, by resource
    forever: dict[str, dict[str, float]] = {"gpu": {}, "cpu": {}}  # node -> held, no end
    for alloc in running:
        end = alloc.end_time()
        for resource in ("gpu", "cpu"):
            held = _held(alloc, resource)
            if end is None:
                by_node = forever[resource]
                by_node[alloc.node] = by_node.get(alloc.node, 0.0) + held
            else:
                ahead[resource] += held * max(0.0, end - t)
    unknown_from: dict[str, int] = {}  # resource -> the first job ahead with no limit
    estimates: dict[int, float] = {}
    unknown: dict[int, str] = {}
    for job in queue:
        resource = _resource(job)
        fits = [n for n in nodes if could_ever_fit(job, n)]
        if job.held:
            unknown[job.job_id] = HELD
        elif job.dependencies:
            unknown[job.job_id] = DEPENDENCY
        elif not fits:
            unknown[job.job_id] = NEVER_FITS
        elif resource in unknown_from:
            unknown[job.job_id] = f"{NO_LIMIT} (job {unknown_from[resource]})"
        else:
            capacity = sum(
                (len(n.gpus) if resource == "gpu" else n.cpus) - forever[resource].get(n.name, 0.0)
                for n in fits
            )
            if capacity < _amount(job) / job.nodes or capacity <= 0:
                unknown[job.job_id] = NEVER_FREE
            else:
                start = t + ahead[resource] / capacity
                if job.begin_time is not None:
                    start = max(start, job.begin_time)
                estimates[job.job_id] = start
        if job.held or job.dependencies or not fits:
            continue  # it adds nothing ahead of the others until it may run
        if job.time_limit_s is None or not math.isfinite(job.time_limit_s):
            unknown_from.setdefault(resource, job.job_id)
        else:
            ahead[resource] += _amount(job) * job.count * job.time_limit_s
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
