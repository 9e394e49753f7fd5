"""Backfill reservations (EASY): when and where the first blocked job of a partition
will start, judged by running jobs' time limits, and the room kept for it.

A lower-priority job may start now on a node holding a reservation only if it ends
before the reservation's time or leaves the reserved job enough room.
"""

from __future__ import annotations

from operator import attrgetter

from podium.api.states import Exclusive
from podium.sched.fit import Hold, Node, could_ever_fit
from podium.sched.model import Allocation, PendingJob

INF = float("inf")
_END = attrgetter("end_estimate")


def respects_hold(job: PendingJob, node: Node, now: float) -> bool:
    """Starting `job` on `node` now leaves the node's reservation intact."""
    hold = node.hold
    if hold is None:
        return True
    end = now + job.time_limit_s if job.time_limit_s is not None else INF
    if end <= hold.time:
        return True
    if conflict(job.exclusive, job.user, hold.exclusive, hold.user):
        return False
    return job.gpus <= hold.gpus and job.cpus <= hold.cpus and job.mem_mb <= hold.mem_mb


def shrink_hold(job: PendingJob, node: Node, now: float) -> None:
    """`job` started on `node`: what it takes past the reservation's time comes out of
    the room kept."""
    hold = node.hold
    if hold is not None and not (
        job.time_limit_s is not None and now + job.time_limit_s <= hold.time
    ):
        hold.gpus -= job.gpus
        hold.cpus -= job.cpus
        hold.mem_mb -= job.mem_mb


def conflict(a_excl: Exclusive, a_user: str, b_excl: Exclusive, b_user: str) -> bool:
    """Two jobs may not share a node because of --exclusive."""
    if a_excl == "node" or b_excl == "node":
        return True
    return (a_excl == "user" or b_excl == "user") and a_user != b_user


def earliest_start(job: PendingJob, node: Node, now: float) -> tuple[float, Hold] | None:
    """When `job`'s per-node share would fit on `node` as running jobs end by their
    limits, and the room left then; None if never (jobs without a limit hold what it
    needs)."""
    if not could_ever_fit(job, node.view):
        return None
    avoid = {g for n, g in job.avoid_gpus if n == node.view.name}
    gpus = sum(1 for g in node.gpus_of(job.gpu_type) if g not in avoid)
    cpus, mem = node.cpus, node.mem_mb
    time = now
    if job.exclusive != "none" or node.exclusive_node or node.exclusive_users:
        conflicts = [
            a for a in node.allocs if conflict(job.exclusive, job.user, a.exclusive, a.user)
        ]
        if conflicts:
            time = max(a.end_estimate for a in conflicts)
            if time == INF:
                return None
    plain = not avoid and job.gpu_type is None  # then every GPU of a job counts

    def freed(alloc: Allocation) -> int:
        if plain:
            return len(alloc.gpu_indices)
        return node.matching((g for g in alloc.gpu_indices if g not in avoid), job.gpu_type)

    later = []
    for alloc in node.allocs:
        if alloc.end_estimate <= time:
            gpus += freed(alloc)
            cpus += alloc.cpus
            mem += alloc.mem_mb
        else:
            later.append(alloc)
    later.sort(key=_END)
    for alloc in later:
        if gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb:
            break
        if alloc.end_estimate == INF:
            return None
        time = max(time, alloc.end_estimate)
        gpus += freed(alloc)
        cpus += alloc.cpus
        mem += alloc.mem_mb
    if gpus < job.gpus or cpus < job.cpus or mem < job.mem_mb:
        return None
    hold = Hold(
        job.job_id,
        time,
        gpus - job.gpus,
        cpus - job.cpus,
        mem - job.mem_mb,
        job.user,
        job.exclusive,
    )
    return time, hold


def reserve(job: PendingJob, candidates: list[Node], now: float) -> tuple[float, list[Node]] | None:
    """Reserve room for `job` on the `job.nodes` candidate nodes where it can start
    soonest (each without a reservation yet); the start time and those nodes, whose
    `hold` is set; None when it can never start (nothing is reserved then)."""
    found: list[tuple[float, int, Node, Hold]] = []
    for order, node in enumerate(candidates):
        if node.hold is not None:
            continue
        got = earliest_start(job, node, now)
        if got is not None:
            found.append((got[0], order, node, got[1]))
    if len(found) < job.nodes:
        return None
    found.sort(key=lambda f: (f[0], f[1]))
    chosen = found[: job.nodes]
    start = chosen[-1][0]
    for _, _, node, hold in chosen:
        hold.time = start
        node.hold = hold
    return start, [c[2] for c in chosen]
