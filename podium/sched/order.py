"""Queue order: multifactor priority (higher first, then earlier submit, lower id),
or submit order when the policy says FIFO."""

from __future__ import annotations

from operator import attrgetter, itemgetter

from podium.sched.model import PendingJob, Policy, Snapshot
from podium.sched.priority import Factors, factors


def priority_key(job: PendingJob, prio: float) -> tuple[float, float, int]:
    """Sort key: higher priority first, then earlier submit, then lower id."""
    return (-prio, job.submit_time, job.job_id)


def queue_order(
    snapshot: Snapshot, now: float, policy: Policy, with_factors: bool = True
) -> tuple[list[PendingJob], dict[int, Factors]]:
    """The pending jobs in the order a pass considers them and, with priority on and
    `with_factors`, each job's priority factors (what `podium priority` shows)."""
    pending = snapshot.pending
    if not policy.use_priority:
        if snapshot.in_submit_order:
            return list(pending), {}
        return sorted(pending, key=attrgetter("submit_time", "job_id")), {}
    weights = policy.weights
    cluster_gpus = sum(len(n.gpus) for n in snapshot.nodes)
    max_qos = max((j.qos_priority for j in pending), default=0)
    tiers = policy.partition_tiers
    max_tier = max(tiers.values(), default=0)
    fairshare = snapshot.fairshare
    prios: dict[int, Factors] = {}
    keys: dict[int, float] = {}
    if with_factors:
        for job in pending:
            f = factors(
                weights=weights,
                now=now,
                submit_time=job.submit_time,
                fairshare=fairshare.get((job.account, job.user), 1.0),
                qos_priority=job.qos_priority,
                max_qos_priority=max_qos,
                gpus=job.total_gpus,
                cluster_gpus=cluster_gpus,
                partition_tier=tiers.get(job.partition, 0),
                max_partition_tier=max_tier,
                nice=job.nice,
            )
            prios[job.job_id] = f
            keys[job.job_id] = -f.total
    else:  # the same arithmetic as `factors` and `total`, inline, in the same order
        max_age = weights.max_age_s
        small = weights.favor_small
        w_age, w_share, w_qos = weights.age, weights.fairshare, weights.qos
        w_size, w_tier = weights.jobsize, weights.partition
        decorated = []
        for job in pending:
            if max_age:
                waited = now - job.submit_time
                age = min(1.0, (waited if waited > 0.0 else 0.0) / max_age)
            else:
                age = 0.0
            qos = job.qos_priority / max_qos if max_qos > 0 else 0.0
            size = min(1.0, job.gpus * job.nodes / cluster_gpus) if cluster_gpus > 0 else 0.0
            if small:
                size = 1.0 - size
            tier = tiers.get(job.partition, 0) / max_tier if max_tier > 0 else 0.0
            share = fairshare.get((job.account, job.user), 1.0) if fairshare else 1.0
            prio = (
                w_age * age
                + w_share * share
                + w_qos * qos
                + w_size * size
                + w_tier * tier
                - job.nice
            )
            decorated.append((-prio, job.submit_time, job.job_id, job))
        decorated.sort(key=itemgetter(0, 1, 2))
        return [d[3] for d in decorated], prios
    order = sorted(pending, key=lambda j: (keys[j.job_id], j.submit_time, j.job_id))
    return order, prios
