"""Least attained service, discretised (Tiresias' 2D-LAS, Gu et al., NSDI 2019).

A job's attained service is the GPU-seconds its runs have had: its earlier runs
(`PendingJob.attained_gpu_s`, `Allocation.attained_gpu_s`) plus, while it runs, its
GPUs times the time since this run started. The limits of `LasRules.queue_limits_gpu_s`
cut attained service into queues: queue 0 below the first limit, queue 1 up to the
second, and so on. A pass takes lower queues first and submit order inside a queue,
so a new job goes before every job that has had more than the first limit's service,
without knowing how long any job will run. The operator's tiers come first
(`podium.sched.order.las_order`), as Slurm orders by partition PriorityTier and QoS
before its multifactor sum: partition tier, then QoS priority, and least attained
service within a tier. A job is never stopped for one of a lower-priority QoS, and
QoS preemption still applies.

Wait guard (`LasRules.overdue_at`): a job that has waited `wait_factor` times its
time limit (at least `wait_floor_s`, at most `wait_cap_s`; the cap for a job with no
limit), its earlier stays in the queue counted, and that a later job has passed over
(`podium.sched.passed`) is overdue, and overdue jobs go before every other of their
partition tier, QoS included, the earliest due first. So a job's place is bounded by
a time it can read from its own limit, as Slurm's age factor eventually lifts any job.
Two rules keep stops from undoing the guard: while an overdue job of a partition
waits, least attained service stops no job there (a stop then only lengthens the
queue that is already late), and a job that has waited its whole allowance before
its run (`LasRules.spent_wait`) is never stopped by it.

Starvation guard (Tiresias' STARVE_LIMIT): a job that has waited, since it last joined
the queue, `starve_factor` times its attained service in GPU-seconds per GPU (the
time it ran, for a rigid job) goes back to queue 0.

Preemption (`victims`): a pending job of queue q may stop running jobs of queues
after q, and only those that save when told to (`Allocation.saves`: they checkpoint
in the preemption grace, so they lose no work), are of no higher QoS priority, and
have run `min_run_s` in their current run (the thrash bound: a job restarted after
a preemption runs at least that long before it may be stopped again). Victims are
chosen by `podium.sched.preempt` (the fewest GPU-seconds lost); a job spanning several
nodes, or an MPS share, does not preempt (it waits for room, as with QoS preemption).

Elastic jobs (`podium.sched.elastic.may_shrink`): a pending job may take replicas from
a running elastic job of its QoS priority only when that job is of a later queue (by
its GPUs on that node), once it has been stable `elastic_min_stable_s`. A pass tries
that shrink before it stops any job (`podium.sched.stages`).

Pure: the clock is an argument.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from podium.sched.model import Allocation, LasRules, PendingJob


def pending_queue(job: PendingJob, now: float, rules: LasRules) -> int:
    """The queue `job` waits in at `now` (queue 0 once starved)."""
    attained = job.attained_gpu_s
    gpus = max(1, job.total_gpus)
    if attained <= 0.0:
        return 0
    factor = rules.starve_factor
    if factor is not None:
        since = job.joined_at
        ran_s = attained / gpus
        if now - since >= factor * ran_s:
            return 0
    return rules.queue_of(attained)


def las_key(job: PendingJob, now: float, rules: LasRules) -> tuple[int, float, int]:
    """Sort key of a pending job: its queue, then submit order."""
    return (pending_queue(job, now, rules), job.submit_time, job.job_id)


def attained_by_job(running: Iterable[Allocation], now: float) -> dict[int, float]:
    """Each running job's attained GPU-seconds at `now` (all its nodes together)."""
    got: dict[int, float] = {}
    for alloc in running:
        here = alloc.gpu_amount * max(0.0, now - alloc.start_time)
        got[alloc.job_id] = got.get(alloc.job_id, alloc.attained_gpu_s) + here
    return got


def victims(
    job: PendingJob,
    now: float,
    rules: LasRules,
    attained: dict[int, float],
    qos_priority: Mapping[str, int],
) -> Callable[[Allocation], bool]:
    """The running jobs `job` may stop: of a later queue than its own, saving at the
    signal, of no higher QoS priority (`qos_priority`: by QoS name), not due to end
    (their time limit, or the end their progress says) within `min_run_s` (a job that
    will be done soon is left to finish rather than pay a save and a restart), and
    that have not waited their wait guard's allowance before this run (`spent_wait`).
    (Their run time against `min_run_s` is preempt_for's `exempt`.)"""
    queue = pending_queue(job, now, rules)

    def may_stop(alloc: Allocation) -> bool:
        end = alloc.end_time()
        return (
            alloc.saves
            and qos_priority.get(alloc.qos, 0) <= job.qos_priority
            and rules.queue_of(attained.get(alloc.job_id, 0.0)) > queue
            and (end is None or end - now > rules.min_run_s)
            and not rules.spent_wait(alloc)
        )

    return may_stop


def next_change(
    running: Iterable[Allocation], pending: Iterable[PendingJob], now: float, rules: LasRules
) -> float | None:
    """The next time after `now` at which a pass could preempt, shrink or order the
    queue otherwise: a running job that saves crosses a queue limit or reaches
    `min_run_s`, an elastic one crosses a queue limit, or a pending job is promoted by
    the starvation guard or becomes overdue (the wait guard). None when nothing will
    change."""
    soonest = math.inf
    per_job: dict[int, tuple[float, float, float]] = {}  # job -> (attained, GPUs, start)
    for alloc in running:
        if not (alloc.saves or alloc.elastic is not None) or alloc.preempting:
            continue
        before, gpus, start = per_job.get(alloc.job_id, (alloc.attained_gpu_s, 0.0, 0.0))
        per_job[alloc.job_id] = (before, gpus + alloc.gpu_amount, alloc.start_time)
    for before, gpus, start in per_job.values():
        eligible = start + rules.min_run_s
        if eligible > now:
            soonest = min(soonest, eligible)
        if gpus <= 0:
            continue
        attained = before + gpus * (now - start)
        queue = rules.queue_of(attained)
        if queue < len(rules.queue_limits_gpu_s):
            crosses = start + (rules.queue_limits_gpu_s[queue] - before) / gpus
            if crosses > now:
                soonest = min(soonest, crosses)
    for job in pending:  # the wait guard: a job becomes overdue
        due = rules.overdue_at(job)
        if due is not None and due > now:
            soonest = min(soonest, due)
    if rules.starve_factor is not None:
        for job in pending:
            if job.attained_gpu_s <= 0.0:
                continue
            since = job.joined_at
            due = since + rules.starve_factor * job.attained_gpu_s / max(1, job.total_gpus)
            if due > now:
                soonest = min(soonest, due)
    return soonest if math.isfinite(soonest) else None


__all__ = ["LasRules", "attained_by_job", "las_key", "next_change", "pending_queue", "victims"]
