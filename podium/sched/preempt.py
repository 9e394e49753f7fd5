"""Preemption: which running jobs to stop so that a higher-QoS job can start.

On one node, the running jobs of QoS levels the job's QoS may preempt, sparing those
younger than the exempt time, chosen to lose the fewest GPU-seconds of work: a
victim loses what it did since its newest checkpoint (`Allocation.lost_work`), not its
whole runtime, so a job that has just checkpointed is the cheapest to stop (kueue #477
asks for this; no scheduler does it). A job
spanning several nodes does not preempt (it waits for room like any other), nor does
an MPS share: its units must come from one GPU that no other user's MPS server holds,
which counting the units victims free cannot promise (victims would be stopped for a
job that still cannot start).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import combinations
from typing import NamedTuple

from podium.sched.fit import MPS, Node, could_ever_fit
from podium.sched.model import Allocation, PendingJob, Policy


class NoVictims:
    """The requests that found no victims during one pass.

    Preemption frees no more during a pass than it could at its start (a new victim's
    node is held for its job, and starts only take), so a request that found no victims
    finds none later in the pass, and neither does a larger one of the same kind (same
    partition, GPU type, QoS and node count)."""

    def __init__(self) -> None:
        self._failed: dict[Hashable, list[tuple[int, int, int]]] = {}
        self._covered: set[tuple[Hashable, int, int, int]] = set()  # once covered, always

    def add(self, job: PendingJob, scope: Hashable = None) -> None:
        """Remember that `job` found no victims (`scope`: what else limits its victims,
        such as its team)."""
        self._failed.setdefault((_kind(job), scope), []).append((job.gpus, job.cpus, job.mem_mb))

    def covers(self, job: PendingJob, scope: Hashable = None) -> bool:
        """Whether `job` is sure to find no victims either."""
        kind = (_kind(job), scope)
        sizes = self._failed.get(kind)
        if sizes is None:
            return False
        shape = (kind, job.gpus, job.cpus, job.mem_mb)
        if shape in self._covered:
            return True
        if any(g <= job.gpus and c <= job.cpus and m <= job.mem_mb for g, c, m in sizes):
            self._covered.add(shape)
            return True
        return False


def _kind(job: PendingJob) -> Hashable:
    return (job.partition, job.gpu_type, job.qos, job.nodes)


def lower_qos(job: PendingJob, policy: Policy) -> Callable[[Allocation], bool]:
    """The running jobs `job` may preempt by QoS: those of QoS its QoS preempts."""
    lower = policy.preempts.get(job.qos, frozenset())
    return lambda alloc: alloc.qos in lower


def preempt_for(
    job: PendingJob,
    candidates: list[Node],
    may_stop: Callable[[Allocation], bool],
    exempt: float,
    now: float,
    victims: set[int],
    quota_need: int = 0,
) -> tuple[Node, list[Allocation]] | None:
    """The node and the running jobs to stop there (those `may_stop` allows, sparing
    any younger than `exempt` seconds) so that `job` fits, losing the fewest
    GPU-seconds of work since the victims' checkpoints; None when no choice works.
    Jobs already being preempted count as freed (then no new victim is needed on that
    node). `quota_need`: the victims must also hold at least that many GPUs between
    them (a team reclaiming its quota), even where `job` would fit already."""
    if job.nodes > 1 or job.gpu_type == MPS:
        return None
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
        if gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb and quota_need <= 0:
            if any(a.job_id in victims for a in node.allocs):
                return node, []  # already freeing enough here: wait for it
            continue
        eligible = []
        most_gpus, most_cpus, most_mem, most_held = gpus, cpus, mem, 0
        for a in node.allocs:
            if (
                a.job_id not in victims
                and not a.starting
                and now - a.start_time >= exempt
                and may_stop(a)
            ):
                eligible.append(a)
                most_gpus += node.matching(a.gpu_indices, job.gpu_type)
                most_cpus += a.cpus
                most_mem += a.mem_mb
                most_held += len(a.gpu_indices)
        if (
            most_gpus < job.gpus
            or most_cpus < job.cpus
            or most_mem < job.mem_mb
            or most_held < quota_need
        ):
            continue  # even stopping every eligible job would not be enough here
        found = _cheapest_cover(eligible, (gpus, cpus, mem), job, node, now, quota_need)
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], node, found[1])
    return (best[1], best[2]) if best is not None else None


EXACT_UP_TO = 12  # eligible victims on one node searched exhaustively (4,096 sets)


class _Gain(NamedTuple):
    """What stopping one victim frees for the job, and what it loses."""

    alloc: Allocation
    gpus: int
    cpus: int
    mem_mb: int
    lost: float


def _cheapest_cover(
    eligible: list[Allocation],
    free: tuple[int, int, int],
    job: PendingJob,
    node: Node,
    now: float,
    quota_need: int = 0,
) -> tuple[float, list[Allocation]] | None:
    """The victims among `eligible` whose stopping frees enough for `job` on `node`
    (beyond `free`: GPUs, CPUs, memory; and at least `quota_need` GPUs held between
    them) and loses the least work, fewest jobs on a tie;
    None when none does. Exact up to EXACT_UP_TO candidates (stopping the job with the
    least to lose first is not always cheapest: two small victims can lose more than
    one large one), greedy by lost work beyond."""
    gains = [
        _Gain(a, node.matching(a.gpu_indices, job.gpu_type), a.cpus, a.mem_mb, a.lost_work(now))
        for a in sorted(eligible, key=lambda a: (a.lost_work(now), a.job_id))
    ]
    need_gpus, need_cpus, need_mem = job.gpus - free[0], job.cpus - free[1], job.mem_mb - free[2]

    def enough(chosen: Sequence[_Gain]) -> bool:
        return (
            sum(c.gpus for c in chosen) >= need_gpus
            and sum(c.cpus for c in chosen) >= need_cpus
            and sum(c.mem_mb for c in chosen) >= need_mem
            and sum(len(c.alloc.gpu_indices) for c in chosen) >= quota_need
        )

    if len(gains) > EXACT_UP_TO:
        picked: list[_Gain] = []
        for gain in gains:
            if enough(picked):
                break
            picked.append(gain)
        if not enough(picked):
            return None
        return sum(g.lost for g in picked), [g.alloc for g in picked]
    best: tuple[float, int, list[Allocation]] | None = None
    for size in range(1, len(gains) + 1):
        for chosen in combinations(gains, size):
            lost = sum(c.lost for c in chosen)
            if (best is None or (lost, size) < best[:2]) and enough(chosen):
                best = (lost, size, [c.alloc for c in chosen])
    return None if best is None else (best[0], best[2])
