"""Preemption: which running jobs to stop so that a higher-QoS job can start.

On one node, the running jobs of QoS levels the job's QoS may preempt, sparing those
younger than the exempt time, chosen to lose the fewest GPU-seconds of work. A job
spanning several nodes does not preempt (it waits for room like any other).
"""

from __future__ import annotations

from podium.sched.fit import Node, could_ever_fit
from podium.sched.model import Allocation, PendingJob, Policy


def preempt_for(
    job: PendingJob,
    candidates: list[Node],
    policy: Policy,
    now: float,
    victims: set[int],
) -> tuple[Node, list[Allocation]] | None:
    """The node and the running jobs to stop there so that `job` fits, losing the
    fewest GPU-seconds of work; None when no choice works. Jobs already being
    preempted count as freed (then no new victim is needed on that node)."""
    if job.nodes > 1:
        return None
    lower = policy.preempts.get(job.qos, frozenset())
    best: tuple[float, Node, list[Allocation]] | None = None
    for node in candidates:
        if not could_ever_fit(job, node.view) or node.hold is not None:
            continue
        gpus, cpus, mem = len(node.gpus_of(job.gpu_type)), node.cpus, node.mem_mb
        for alloc in node.allocs:
            if alloc.job_id in victims:
                gpus += node.matching(alloc.gpu_indices, job.gpu_type)
                cpus += alloc.cpus
                mem += alloc.mem_mb
        if gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb:
            if any(a.job_id in victims for a in node.allocs):
                return node, []  # already freeing enough here: wait for it
            continue
        choices = sorted(
            (
                a
                for a in node.allocs
                if a.qos in lower
                and a.job_id not in victims
                and now - a.start_time >= policy.preempt_exempt_s
            ),
            key=lambda a: (len(a.gpu_indices) * (now - a.start_time), a.job_id),
        )
        chosen: list[Allocation] = []
        lost = 0.0
        for alloc in choices:
            if gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb:
                break
            chosen.append(alloc)
            lost += len(alloc.gpu_indices) * (now - alloc.start_time)
            gpus += node.matching(alloc.gpu_indices, job.gpu_type)
            cpus += alloc.cpus
            mem += alloc.mem_mb
        enough = gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb
        if enough and chosen and (best is None or lost < best[0]):
            best = (lost, node, chosen)
    return (best[1], best[2]) if best is not None else None
