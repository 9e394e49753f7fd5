"""One scheduling pass: strict priority order, gang allocation, no oversubscription.

Jobs are considered in order of QoS priority, then nice, then submit time. A job
starts only when all its GPUs, CPUs and memory fit on one node at once. The first job
of a partition that cannot start blocks the lower-priority jobs behind it (reason
Priority), so a big job is never starved by a stream of small ones; backfill will
relax this without delaying it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from podium.sched.deps import DepStatus, evaluate
from podium.sched.model import (
    Allocation,
    Decisions,
    NodeView,
    PendingJob,
    Reason,
    Snapshot,
    Start,
)


@dataclass
class _NodeFree:
    """What is still free on a node during a pass."""

    view: NodeView
    cpus: int
    mem_mb: int
    free_gpus: list[int]
    users: set[str] = field(default_factory=set)
    exclusive_node: bool = False
    exclusive_users: set[str] = field(default_factory=set)

    def take(self, alloc: Allocation) -> None:
        self.cpus -= alloc.cpus
        self.mem_mb -= alloc.mem_mb
        self.free_gpus = [g for g in self.free_gpus if g not in alloc.gpu_indices]
        self.users.add(alloc.user)
        if alloc.exclusive == "node":
            self.exclusive_node = True
        elif alloc.exclusive == "user":
            self.exclusive_users.add(alloc.user)


def _free_state(snapshot: Snapshot) -> dict[str, _NodeFree]:
    free = {
        n.name: _NodeFree(n, n.cpus, n.memory_mb, [g.index for g in n.gpus]) for n in snapshot.nodes
    }
    for alloc in snapshot.running:
        if alloc.node in free:
            free[alloc.node].take(alloc)
    return free


def priority_key(job: PendingJob) -> tuple[int, int, float, int]:
    """Sort key: higher QoS first, then lower nice, then earlier submit, then lower id."""
    return (-job.qos_priority, job.nice, job.submit_time, job.job_id)


def _fits(job: PendingJob, node: _NodeFree) -> tuple[int, ...] | None:
    """Return the GPUs `job` would get on `node`, or None if it does not fit now."""
    if job.cpus > node.cpus or job.mem_mb > node.mem_mb:
        return None
    if node.exclusive_node:
        return None
    if job.exclusive == "node" and node.users:
        return None
    if node.exclusive_users - {job.user}:
        return None
    if job.exclusive == "user" and node.users - {job.user}:
        return None
    types = {g.index: g.type for g in node.view.gpus}
    usable = [g for g in node.free_gpus if job.gpu_type is None or types[g] == job.gpu_type]
    if len(usable) < job.gpus:
        return None
    return tuple(sorted(usable)[: job.gpus])


def _could_ever_fit(job: PendingJob, node: NodeView) -> bool:
    gpus = [g for g in node.gpus if job.gpu_type is None or g.type == job.gpu_type]
    return job.cpus <= node.cpus and job.mem_mb <= node.memory_mb and job.gpus <= len(gpus)


def schedule(snapshot: Snapshot, now: float) -> Decisions:
    """Decide which pending jobs start now and why the others wait.

    Pure: reads only `snapshot` and `now`. Never allocates a GPU twice nor more
    CPUs or memory than a node has; starts all of a job's resources together.
    """
    free = _free_state(snapshot)
    starts: list[Start] = []
    reasons: dict[int, str] = {}
    cancels: dict[int, str] = {}
    blocked: set[str] = set()
    array_running: dict[int, int] = {}
    singleton_owner: set[tuple[str, str]] = set()
    for alloc in snapshot.running:
        if alloc.array_job_id is not None:
            array_running[alloc.array_job_id] = array_running.get(alloc.array_job_id, 0) + 1
        singleton_owner.add((alloc.user, alloc.name))

    for job in sorted(snapshot.pending, key=priority_key):
        if job.held:
            reasons[job.job_id] = Reason.HELD
            continue
        if job.begin_time is not None and job.begin_time > now:
            reasons[job.job_id] = Reason.BEGIN_TIME
            continue
        if job.dependencies:
            busy = (job.user, job.name) in singleton_owner
            status = evaluate(
                job.dependencies,
                job.dependency_any,
                snapshot.job_states,
                snapshot.array_members,
                busy,
            )
            if any(d.kind == "singleton" for d in job.dependencies):
                singleton_owner.add((job.user, job.name))
            if status is DepStatus.NEVER:
                reasons[job.job_id] = Reason.DEPENDENCY_NEVER
                if job.kill_on_invalid_dep:
                    cancels[job.job_id] = Reason.DEPENDENCY_NEVER
                continue
            if status is DepStatus.WAITING:
                reasons[job.job_id] = Reason.DEPENDENCY
                continue
        if (
            job.array_job_id is not None
            and job.array_throttle is not None
            and array_running.get(job.array_job_id, 0) >= job.array_throttle
        ):
            reasons[job.job_id] = Reason.ARRAY_LIMIT
            continue
        if job.partition in blocked:
            reasons[job.job_id] = Reason.PRIORITY
            continue
        names = snapshot.partition_nodes.get(job.partition)
        candidates = [free[n] for n in (names or free.keys()) if n in free]
        placed = False
        any_up = False
        for node in candidates:
            if not node.view.schedulable:
                continue
            any_up = True
            gpus = _fits(job, node)
            if gpus is None:
                continue
            alloc = Allocation(
                job_id=job.job_id,
                node=node.view.name,
                user=job.user,
                gpu_indices=gpus,
                cpus=job.cpus,
                mem_mb=job.mem_mb,
                exclusive=job.exclusive,
                name=job.name,
                array_job_id=job.array_job_id,
            )
            node.take(alloc)
            starts.append(Start(job.job_id, node.view.name, gpus, job.cpus, job.mem_mb))
            if job.array_job_id is not None:
                array_running[job.array_job_id] = array_running.get(job.array_job_id, 0) + 1
            singleton_owner.add((job.user, job.name))
            placed = True
            break
        if placed:
            continue
        fits_some = any(n.view.schedulable and _could_ever_fit(job, n.view) for n in candidates)
        reasons[job.job_id] = Reason.RESOURCES if any_up and fits_some else Reason.NODE_UNAVAILABLE
        blocked.add(job.partition)
    return Decisions(starts=tuple(starts), reasons=reasons, cancels=cancels)
