"""Queue order: multifactor priority (higher first, then earlier submit, lower id),
or submit order when the policy says FIFO. Either way an expedited job (one requeued
by auto-resume after a failure: a full restart of a job that was running) goes first,
so that the job that failed restarts before the queue takes the room it held; it
preempts nobody for it (preemption goes by QoS, `podium.sched.preempt`), and it does
not go before a pending job whose QoS may preempt its own (that job would only
preempt it again).

A caller that keeps its pending jobs in `PendingGroups` lets a pass walk the queue
lazily (`GroupedOrder`): the heads of the groups are merged by the same key, and a
group the pass finds unable to start is dropped whole, so a long queue of look-alike
jobs costs a pass per group, not per job.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterator, Sequence
from operator import itemgetter

from podium.sched.fit import request_of
from podium.sched.las import pending_queue
from podium.sched.model import PendingGroup, PendingJob, Policy, Snapshot
from podium.sched.priority import Factors, factors, limit_level, shortness_of

INF = float("inf")
OrderKey = tuple[float, ...]  # a pending job's place: lower goes first


def priority_key(job: PendingJob, prio: float) -> tuple[float, float, int]:
    """Sort key: higher priority first, then earlier submit, then lower id."""
    return (-prio, job.submit_time, job.job_id)


def _priority_of(
    snapshot: Snapshot, jobs: Sequence[PendingJob], now: float, policy: Policy
) -> Callable[[PendingJob], float]:
    """A job's priority in this pass: the arithmetic of `priority.factors` and
    `Factors.total`, inline and in the same order (so the same floats), for speed.
    `jobs` are the pending jobs whose largest QoS priority normalises the QoS factor."""
    weights = policy.weights
    cluster_gpus = sum(len(n.gpus) for n in snapshot.nodes)
    max_qos = max((j.qos_priority for j in jobs), default=0)
    tiers = policy.partition_tiers
    max_tier = max(tiers.values(), default=0)
    fairshare = snapshot.fairshare
    max_age = weights.max_age_s
    small = weights.favor_small
    w_age, w_share, w_qos = weights.age, weights.fairshare, weights.qos
    w_size, w_tier, w_short = weights.jobsize, weights.partition, weights.shortness
    starve = weights.starve_after_s

    outranked = _outranked(jobs, policy)

    def priority(job: PendingJob) -> float:
        if job.expedite and job.qos not in outranked:
            return INF
        waited = now - job.submit_time
        age = min(1.0, (waited if waited > 0.0 else 0.0) / max_age) if max_age else 0.0
        qos = job.qos_priority / max_qos if max_qos > 0 else 0.0
        size = min(1.0, job.gpus * job.nodes / cluster_gpus) if cluster_gpus > 0 else 0.0
        if small:
            size = 1.0 - size
        tier = tiers.get(job.partition, 0) / max_tier if max_tier > 0 else 0.0
        share = fairshare.get((job.account, job.user), 1.0) if fairshare else 1.0
        value = (
            w_age * age + w_share * share + w_qos * qos + w_size * size + w_tier * tier - job.nice
        )
        if w_short:
            value += w_short * shortness_of(job.total_gpus, job.time_limit_s, waited, starve)
        return value

    return priority


def queue_order(
    snapshot: Snapshot, now: float, policy: Policy, with_factors: bool = True
) -> tuple[list[PendingJob], dict[int, Factors]]:
    """The pending jobs in the order a pass considers them and, with priority on and
    `with_factors`, each job's priority factors (what `podium priority` shows)."""
    pending = snapshot.pending
    if policy.las is not None:
        return sorted(pending, key=las_order(pending, now, policy)), (
            _all_factors(snapshot, now, policy) if with_factors else {}
        )
    if not policy.use_priority:
        if snapshot.in_submit_order and not any(j.expedite for j in pending):
            return list(pending), {}
        return sorted(pending, key=_fifo_key(_outranked(pending, policy))), {}
    if not with_factors:
        priority = _priority_of(snapshot, pending, now, policy)
        decorated = [(-priority(job), job.submit_time, job.job_id, job) for job in pending]
        decorated.sort(key=itemgetter(0, 1, 2))
        return [d[3] for d in decorated], {}
    prios = _all_factors(snapshot, now, policy)
    outranked = _outranked(pending, policy)
    order = sorted(
        pending,
        key=lambda j: (
            -INF if j.expedite and j.qos not in outranked else -prios[j.job_id].total,
            j.submit_time,
            j.job_id,
        ),
    )
    return order, prios


def _all_factors(snapshot: Snapshot, now: float, policy: Policy) -> dict[int, Factors]:
    """Every pending job's priority factors (what `podium priority` shows)."""
    pending = snapshot.pending
    weights = policy.weights
    cluster_gpus = sum(len(n.gpus) for n in snapshot.nodes)
    max_qos = max((j.qos_priority for j in pending), default=0)
    tiers = policy.partition_tiers
    max_tier = max(tiers.values(), default=0)
    prios: dict[int, Factors] = {}
    for job in pending:
        prios[job.job_id] = factors(
            weights=weights,
            now=now,
            submit_time=job.submit_time,
            fairshare=snapshot.fairshare.get((job.account, job.user), 1.0),
            qos_priority=job.qos_priority,
            max_qos_priority=max_qos,
            gpus=job.total_gpus,
            cluster_gpus=cluster_gpus,
            partition_tier=tiers.get(job.partition, 0),
            max_partition_tier=max_tier,
            nice=job.nice,
            time_limit_s=job.time_limit_s,
        )
    return prios


def las_order(
    jobs: Sequence[PendingJob], now: float, policy: Policy
) -> Callable[[PendingJob], OrderKey]:
    """Least attained service order (`podium.sched.las`) under the operator's tiers, as
    Slurm orders by partition PriorityTier and QoS before its multifactor sum: an
    expedited job first (one not outranked), then by partition tier; within a tier
    overdue jobs first (the wait guard, `LasRules.overdue_at`: before any QoS), the
    earliest due first, then by QoS priority (a high-QoS job goes before a normal one
    whatever their service), then jobs of a QoS no waiting job may preempt before those
    of one it may (a victim never goes before the job that stopped it), then by queue,
    then submit order."""
    rules = policy.las
    assert rules is not None
    outranked = _outranked(jobs, policy)
    tiers = policy.partition_tiers

    def key(job: PendingJob) -> OrderKey:
        if job.expedite and job.qos not in outranked:
            return (-INF, 0.0, 0.0, 0, 0, job.submit_time, job.job_id)
        tier = -tiers.get(job.partition, 0)
        due = rules.overdue_at(job)
        if due is not None and now >= due:  # the wait guard: the earliest due first
            return (tier, 0.0, due, 0, 0, 0.0, job.job_id)
        return (
            tier,
            1.0,
            -job.qos_priority,
            job.qos in outranked,
            pending_queue(job, now, rules),
            job.submit_time,
            job.job_id,
        )

    return key


def _outranked(jobs: Sequence[PendingJob], policy: Policy) -> frozenset[str]:
    """The QoS levels some pending job may preempt: an expedited job of one of them does
    not go first (it would be preempted by the job it went before)."""
    found: set[str] = set()
    for qos in {j.qos for j in jobs}:
        found |= policy.preempts.get(qos, frozenset())
    return frozenset(found)


def _fifo_key(outranked: frozenset[str]) -> Callable[[PendingJob], tuple[bool, float, int]]:
    """Submit order, an expedited job first (one not `outranked`)."""
    return lambda j: (not (j.expedite and j.qos not in outranked), j.submit_time, j.job_id)


def group_of(job: PendingJob, by_limit_level: bool = True) -> Hashable:
    """The group a pending job belongs to: jobs alike in everything that orders them
    (QoS, account and user, size, partition, nice, and the level of their time limit
    where `by_limit_level`: shortest-first orders by it) and in everything a pass asks
    of them (the request, limits, preemption). Within a group, submit order is priority
    order. A job with a condition of its own (hold, begin time, dependencies, an array
    throttle, expedited, or service attained in earlier runs) is a group by itself."""
    if (
        job.held
        or job.expedite
        or job.attained_gpu_s > 0.0
        or job.begin_time is not None
        or job.dependencies
        or job.array_throttle
    ):
        return job.job_id
    alike = (*request_of(job), job.qos, job.qos_priority, job.account, job.user, job.nice)
    return (*alike, limit_level(job.time_limit_s)) if by_limit_level else alike


def orders_by_limit(policy: Policy) -> bool:
    """Whether `policy`'s order depends on a job's time limit (shortest-first, or least
    attained service's wait guard): its groups must then keep time-limit levels apart
    (`group_of`)."""
    return policy.weights.shortness != 0 or (
        policy.las is not None and policy.las.wait_factor is not None
    )


class PendingGroups:
    """Pending jobs kept by `group_of`, each group in submit order, for a caller that
    adds and removes jobs between passes (the simulator). Pure data: no clock, no I/O."""

    def __init__(self, by_limit_level: bool = True) -> None:
        self.by_limit_level = by_limit_level  # group_of's: False only where no order needs it
        self.groups: dict[Hashable, PendingGroup] = {}
        self._keys: dict[Hashable, list[tuple[float, int]]] = {}

    def add(self, job: PendingJob) -> None:
        """Queue `job` in its group (anywhere in submit order: a requeued job goes back
        to its place)."""
        name = group_of(job, self.by_limit_level)
        limit = _limit(job)
        key = (job.submit_time, job.job_id)
        group, keys = self.groups.get(name), self._keys.get(name)
        if group is None or keys is None:
            self.groups[name] = PendingGroup([job], [limit])
            self._keys[name] = [key]
            return
        at = len(keys) if keys[-1] < key else bisect_left(keys, key)
        keys.insert(at, key)
        group.jobs.insert(at, job)
        after = group.shortest[at] if at < len(group.shortest) else INF
        group.shortest.insert(at, min(limit, after))
        _lower_before(group.shortest, at, limit)

    def remove(self, job: PendingJob) -> None:
        """Take `job` out of its group (it started, or it left the queue)."""
        name = group_of(job, self.by_limit_level)
        group, keys = self.groups[name], self._keys[name]
        at = bisect_left(keys, (job.submit_time, job.job_id))
        del group.jobs[at], group.shortest[at], keys[at]
        if not group.jobs:
            del self.groups[name], self._keys[name]
            return
        shortest, jobs = group.shortest, group.jobs
        for i in range(at - 1, -1, -1):  # the jobs before it may have had it as shortest
            value = min(_limit(jobs[i]), shortest[i + 1] if i + 1 < len(jobs) else INF)
            if value == shortest[i]:
                break
            shortest[i] = value


def _limit(job: PendingJob) -> float:
    return job.time_limit_s if job.time_limit_s is not None else INF


def _lower_before(shortest: list[float], at: int, limit: float) -> None:
    """A job with `limit` now sits at `at`: the suffixes before it are no longer."""
    for i in range(at - 1, -1, -1):
        if shortest[i] <= limit:
            break
        shortest[i] = limit


class GroupedOrder:
    """The queue of a snapshot that has `groups`, walked lazily in exactly the order
    `queue_order` gives: a k-way merge of the groups' heads by the same key. `drop()`
    ends the current job's group for the rest of the pass; `drop_as_long(limit)` ends
    it if none of its later jobs has a shorter time limit than `limit`."""

    def __init__(self, snapshot: Snapshot, now: float, policy: Policy) -> None:
        groups = [g for g in snapshot.groups or () if g.jobs]
        self._groups = groups
        self.partitions = len({g.jobs[0].partition for g in groups})
        self.any_dependencies = any(g.jobs[0].dependencies for g in groups)
        self.any_counted = any(  # jobs whose wait depends on what is running
            g.jobs[0].dependencies or g.jobs[0].array_throttle is not None for g in groups
        )
        self._dropped = False
        self._as_long: float | None = None
        self._key: Callable[[PendingJob], OrderKey]
        if policy.las is not None:
            self._key = las_order([g.jobs[0] for g in groups], now, policy)
        elif policy.use_priority:
            heads = [g.jobs[0] for g in groups]  # the QoS priority is the same within a group
            priority = _priority_of(snapshot, heads, now, policy)
            self._key = lambda j: (
                -priority(j),
                j.submit_time,
                j.job_id,
            )
        else:
            fifo = _fifo_key(_outranked([g.jobs[0] for g in groups], policy))
            self._key = lambda j: (0.0 if fifo(j)[0] else -INF, j.submit_time, j.job_id)
        self._heap = [(self._key(g.jobs[0]), i, 0) for i, g in enumerate(groups)]
        heapq.heapify(self._heap)

    def drop(self) -> None:
        """Skip the rest of the group of the job last given."""
        self._dropped = True

    def drop_as_long(self, limit: float) -> None:
        """Skip the rest of the group of the job last given if none of them has a time
        limit shorter than `limit`."""
        self._as_long = limit

    def __iter__(self) -> Iterator[PendingJob]:
        heap, groups, key = self._heap, self._groups, self._key
        while heap:
            _, index, at = heap[0]
            group = groups[index]
            jobs = group.jobs
            self._dropped, self._as_long = False, None
            yield jobs[at]
            as_long = self._as_long
            if (
                self._dropped
                or at + 1 == len(jobs)
                or (as_long is not None and group.shortest[at + 1] >= as_long)
            ):
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (key(jobs[at + 1]), index, at + 1))


__all__ = [
    "GroupedOrder",
    "PendingGroups",
    "group_of",
    "las_order",
    "orders_by_limit",
    "priority_key",
    "queue_order",
]
