"""Elastic jobs in a pass: start as large as fits, shrink for others, grow into idle GPUs.

An elastic job runs MIN to MAX replicas (`Elastic`). Pure, like the rest of the core:

- **Start.** A pending elastic job starts at the largest of its sizes (MIN, MIN + STEP,
  ... up to MAX, and MAX) that fits now, within its limits and team quota (`larger_sizes`).
- **Shrink instead of preempt.** A job that cannot start may take replicas from a
  running elastic job by the rules preemption follows: of a QoS its QoS preempts
  (the QoS `preempt` lists, as Slurm's), at once; or of the same QoS priority once that
  job has run `elastic_min_stable_s` at its size (replicas above MIN are shared among
  equals); never below MIN (`shrink_for`), never for a QoS that is merely higher.
  Under least attained service the equals are those of an earlier queue: a job
  shrinks only for one that has had less service (`podium.sched.las`). The
  elastic job is resized (stopped after its grace and started again smaller); nothing
  is killed for good.
- **Grow.** When nothing waits for room, a running elastic job that has run
  `elastic_grow_delay_s` at its size grows to the largest of its sizes that the GPUs,
  CPUs and memory left free on its node hold (`grow_into_free`). It does not grow
  while another job on its node is ending (cancelled, its processes being stopped):
  what that job holds comes free within the kill wait, and growing at each end would
  restart every replica once per end (scancel of two jobs: 1 -> 2 -> 4) instead of
  once into all of it (1 -> 4).

A resize restarts every replica from the job's last checkpoint, so it loses the work
since then on all its GPUs (`Allocation.lost_work`): among the jobs that could shrink,
the one losing least is chosen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from podium.sched.fit import MPS, Node, could_ever_fit
from podium.sched.las import attained_by_job, pending_queue
from podium.sched.model import Allocation, Elastic, PendingJob, Policy, Resize


def resized(job: PendingJob, replicas: int) -> PendingJob:
    """`job` asking for `replicas` replicas' resources."""
    e = job.elastic
    assert e is not None
    gpus, cpus, mem_mb = e.held(replicas)
    return dataclasses.replace(job, gpus=gpus, cpus=cpus, mem_mb=mem_mb)


def larger_sizes(job: PendingJob) -> list[PendingJob]:
    """`job` at each of its sizes above MIN, largest first (none for a job that is not
    elastic). `job` itself stands for MIN."""
    e = job.elastic
    if e is None:
        return []
    return [resized(job, r) for r in e.sizes() if r > e.min]


def may_shrink(job: PendingJob, alloc: Allocation, policy: Policy, now: float) -> bool:
    """Whether `job` may take replicas from `alloc`: at once when `job`'s QoS preempts
    `alloc`'s (what it could preempt whole, it may shrink); when both have the same QoS
    priority, once `alloc` has been stable long enough, and under least attained
    service only when `alloc` is of a later queue than `job` (it has had more
    service). A higher QoS priority alone gives no right to shrink, as it gives none
    to preempt."""
    if alloc.qos in policy.preempts.get(job.qos, ()):
        return True
    theirs = policy.qos_priority.get(alloc.qos, 0)
    if job.qos_priority != theirs or now - alloc.start_time < policy.elastic_min_stable_s:
        return False
    las = policy.las
    return las is None or las.queue_of(attained_by_job((alloc,), now)[alloc.job_id]) > (
        pending_queue(job, now, las)
    )


def shrink_for(
    job: PendingJob,
    candidates: Iterable[Node],
    policy: Policy,
    now: float,
    victims: set[int],
    allowed: Callable[[Allocation], bool] | None = None,
    quota_need: int = 0,
) -> tuple[Node, list[Resize]] | None:
    """The node and the resizes of running elastic jobs there that make room for
    `job`, losing the least work; None when none do. `allowed` replaces the rule of
    who may shrink whom (a team reclaiming its quota: the borrowers), and the shrinks
    must then also give up `quota_need` GPUs between them.

    On each node: the one job whose shrink suffices and loses least (the fewest
    replicas off it); else several, the cheapest first, each shrunk as far as it must
    (to MIN but the last). A resize restarts the whole job, so each costs its whole
    `lost_work`."""
    if job.nodes > 1 or job.gpu_type == MPS:
        return None
    best: tuple[float, int, Node, list[Resize]] | None = None
    for node in candidates:
        if node.hold is not None or not node.elastic_jobs or not could_ever_fit(job, node.view):
            continue  # held for another job, nothing here may shrink, or it never fits
        gpus = len(node.gpus_of(job.gpu_type))
        if quota_need > 0:  # as if fewer were free: the shrinks must free the quota too
            gpus = min(gpus, job.gpus - quota_need)
        free = (gpus, node.cpus, node.mem_mb)
        able = sorted(
            (a for a in node.allocs if a.elastic is not None and a.job_id not in victims
             and not a.starting and a.replicas > a.elastic.min
             and (allowed(a) if allowed is not None else may_shrink(job, a, policy, now))),
            key=lambda a: (a.lost_work(now), a.job_id),
        )  # fmt: skip
        found = _one_shrink(job, node, able, free, now) or _several_shrinks(
            job, node, able, free, now
        )
        if found is not None and (best is None or found[:2] < best[:2]):
            best = (found[0], found[1], node, found[2])
    if best is None:
        return None
    return best[2], best[3]


def _per_replica(job: PendingJob, node: Node, alloc: Allocation) -> tuple[int, int, int]:
    """What one replica of `alloc` frees for `job`: GPUs of its type, CPUs, memory."""
    e = alloc.elastic
    assert e is not None
    held = alloc.replicas + e.spares  # its spares hold GPUs too, and are not shrunk
    per_gpu = node.matching(alloc.gpu_indices, job.gpu_type) // max(1, held)
    return per_gpu, e.cpus, e.mem_mb


def _resize(job: PendingJob, alloc: Allocation, to: int) -> Resize:
    cause = f"shrink {alloc.replicas}->{to} for job {job.job_id}"
    return Resize(alloc.job_id, to, cause, job.job_id)


def _one_shrink(
    job: PendingJob, node: Node, able: list[Allocation], free: tuple[int, int, int], now: float
) -> tuple[float, int, list[Resize]] | None:
    """The cheapest single shrink that makes room: (lost work, replicas off, [resize])."""
    best: tuple[float, int, list[Resize]] | None = None
    for alloc in able:
        assert alloc.elastic is not None
        to = _shrunk(job, free, _per_replica(job, node, alloc), alloc.elastic, alloc.replicas)
        if to is None:
            continue
        option = (alloc.lost_work(now), alloc.replicas - to, [_resize(job, alloc, to)])
        if best is None or option[:2] < best[:2]:
            best = option
    return best


def _several_shrinks(
    job: PendingJob, node: Node, able: list[Allocation], free: tuple[int, int, int], now: float
) -> tuple[float, int, list[Resize]] | None:
    """Shrinks of several jobs, cheapest first, that together make room; None when
    even every one at MIN does not."""
    have = list(free)
    chosen: list[Resize] = []
    lost = 0.0
    gone = 0
    for alloc in able:
        e = alloc.elastic
        assert e is not None
        each = _per_replica(job, node, alloc)
        to = _shrunk(job, (have[0], have[1], have[2]), each, e, alloc.replicas) or e.min
        off = alloc.replicas - to
        have = [h + off * x for h, x in zip(have, each, strict=True)]
        chosen.append(_resize(job, alloc, to))
        lost += alloc.lost_work(now)
        gone += off
        if have[0] >= job.gpus and have[1] >= job.cpus and have[2] >= job.mem_mb:
            return lost, gone, chosen
    return None


def _shrunk(
    job: PendingJob,
    free: tuple[int, int, int],
    per_replica: tuple[int, int, int],
    e: Elastic,
    replicas: int,
) -> int | None:
    """The largest of `e`'s sizes below `replicas` that leaves room, with `free`, for
    `job`; None when even MIN does not."""
    for size in e.sizes():
        if size >= replicas:
            continue
        gone = replicas - size
        if all(
            have + gone * each >= need
            for need, have, each in zip((job.gpus, job.cpus, job.mem_mb), free, per_replica,
                                        strict=True)
        ):  # fmt: skip
            return size
    return None


def grow_into_free(
    allocs: Iterable[Allocation],
    nodes: dict[str, Node],
    policy: Policy,
    now: float,
    fits_quota: Callable[[Allocation, int], bool],
    ending_nodes: frozenset[str] = frozenset(),
) -> list[Resize]:
    """Grow each running elastic job, by whole steps up to MAX, into what is free on
    its node (not held for another job, and no job on it ending: `ending_nodes`);
    `fits_quota(alloc, gpus)` says whether its limits and team allow `gpus` more."""
    out = []
    for alloc in sorted(allocs, key=lambda a: (a.start_time, a.job_id)):
        e = alloc.elastic
        node = nodes.get(alloc.node)
        if e is None or node is None or node.hold is not None or alloc.preempting:
            continue
        if alloc.ending or alloc.node in ending_nodes:
            continue
        if alloc.replicas >= e.max or now - alloc.start_time < policy.elastic_grow_delay_s:
            continue
        to = _grown(e, alloc.replicas, node)
        while to > alloc.replicas and not fits_quota(alloc, (to - alloc.replicas) * e.gpus):
            to = max([s for s in e.sizes() if s < to], default=alloc.replicas)
        if to <= alloc.replicas:
            continue
        more = to - alloc.replicas
        out.append(Resize(alloc.job_id, to, f"grow {alloc.replicas}->{to} into free GPUs"))
        node.cpus -= more * e.cpus  # what this pass gave it is no one else's
        node.mem_mb -= more * e.mem_mb
        node.free_gpus = node.free_gpus[more * e.gpus :]
    return out


def _grown(e: Elastic, replicas: int, node: Node) -> int:
    """The largest of `e`'s sizes that fits in what `node` has free besides what the
    job holds (`replicas` itself when none larger does)."""
    for size in e.sizes():
        if size <= replicas:
            break
        n = size - replicas
        if (
            n * e.gpus <= len(node.gpus_of(None))
            and n * e.cpus <= node.cpus
            and n * e.mem_mb <= node.mem_mb
        ):
            return size
    return replicas


def next_change(allocs: Iterable[Allocation], policy: Policy, now: float) -> float | None:
    """The earliest time after `now` at which a running elastic job may grow (its grow
    delay ends) or be shrunk for a job of its own QoS (its stable time ends): a pass
    is due then, since nothing else may change."""
    times = []
    for alloc in allocs:
        e = alloc.elastic
        if e is None or alloc.preempting:
            continue
        if alloc.replicas < e.max:
            times.append(alloc.start_time + policy.elastic_grow_delay_s)
        if alloc.replicas > e.min:
            times.append(alloc.start_time + policy.elastic_min_stable_s)
    return min((t for t in times if t > now), default=None)
