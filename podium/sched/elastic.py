"""Elastic jobs in a pass: start as large as fits, shrink for others, grow into idle GPUs.

An elastic job runs MIN to MAX replicas (`Elastic`). Pure, like the rest of the core:

- **Start.** A pending elastic job starts at the largest of its sizes (MIN, MIN + STEP,
  ... up to MAX, and MAX) that fits now, within its limits and team quota (`larger_sizes`).
- **Shrink instead of preempt.** A job that cannot start may take replicas from a
  running elastic job of lower QoS priority, or of the same priority once that job has
  run `elastic_min_stable_s` at its size, never below MIN (`shrink_for`). The elastic
  job is resized (stopped after its grace and started again smaller); nothing is
  killed for good. A job of higher QoS does not wait for the stable time.
- **Grow.** When nothing waits for room, a running elastic job that has run
  `elastic_grow_delay_s` at its size grows to the largest of its sizes that the GPUs,
  CPUs and memory left free on its node hold (`grow_into_free`).

A resize restarts every replica from the job's last checkpoint, so it loses the work
since then on all its GPUs (`Allocation.lost_work`): among the jobs that could shrink,
the one losing least is chosen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from podium.sched.fit import MPS, Node, could_ever_fit
from podium.sched.model import Allocation, Elastic, PendingJob, Policy, Resize


def resized(job: PendingJob, replicas: int) -> PendingJob:
    """`job` asking for `replicas` replicas' resources."""
    e = job.elastic
    assert e is not None
    return dataclasses.replace(
        job, gpus=replicas * e.gpus, cpus=replicas * e.cpus, mem_mb=replicas * e.mem_mb
    )


def larger_sizes(job: PendingJob) -> list[PendingJob]:
    """`job` at each of its sizes above MIN, largest first (none for a job that is not
    elastic). `job` itself stands for MIN."""
    e = job.elastic
    if e is None:
        return []
    return [resized(job, r) for r in e.sizes() if r > e.min]


def _may_shrink(job: PendingJob, alloc: Allocation, policy: Policy, now: float) -> bool:
    """Whether `job` may take replicas from `alloc`: lower QoS priority always; the same
    priority once `alloc` has been stable long enough."""
    theirs = policy.qos_priority.get(alloc.qos, 0)
    if job.qos_priority > theirs:
        return True
    return job.qos_priority == theirs and now - alloc.start_time >= policy.elastic_min_stable_s


def shrink_for(
    job: PendingJob,
    candidates: Iterable[Node],
    policy: Policy,
    now: float,
    victims: set[int],
) -> tuple[Node, Resize] | None:
    """The node and the resize of one running elastic job there that makes room for
    `job` (the fewest steps off the job that loses least); None when none does."""
    if job.nodes > 1 or job.gpu_type == MPS:
        return None
    best: tuple[float, int, Node, Resize] | None = None
    for node in candidates:
        if node.hold is not None or not could_ever_fit(job, node.view):
            continue
        gpus, cpus, mem = len(node.gpus_of(job.gpu_type)), node.cpus, node.mem_mb
        for alloc in node.allocs:
            e = alloc.elastic
            if e is None or alloc.job_id in victims or alloc.replicas <= e.min:
                continue
            if not _may_shrink(job, alloc, policy, now):
                continue
            per_gpu = node.matching(alloc.gpu_indices, job.gpu_type) // max(1, alloc.replicas)
            to = _shrunk(job, (gpus, cpus, mem), (per_gpu, e.cpus, e.mem_mb), e, alloc.replicas)
            if to is None:
                continue
            lost = alloc.lost_work(now)
            if best is None or (lost, alloc.replicas - to) < best[:2]:
                cause = f"shrink {alloc.replicas}->{to} for job {job.job_id}"
                best = (
                    lost,
                    alloc.replicas - to,
                    node,
                    Resize(alloc.job_id, to, cause, job.job_id),
                )
    return None if best is None else (best[2], best[3])


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
) -> list[Resize]:
    """Grow each running elastic job, by whole steps up to MAX, into what is free on
    its node (not held for another job); `fits_quota(alloc, gpus)` says whether its
    limits and team allow `gpus` more."""
    out = []
    for alloc in sorted(allocs, key=lambda a: (a.start_time, a.job_id)):
        e = alloc.elastic
        node = nodes.get(alloc.node)
        if e is None or node is None or node.hold is not None or alloc.preempting:
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
