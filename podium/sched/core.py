"""One scheduling pass: priority order, gang allocation, backfill, preemption, limits.

Order: multifactor priority (or submit order when `use_priority` is off). A job
starts only when all its GPUs, CPUs and memory fit on one node at once; nodes are
chosen best-fit by free GPUs, and within a node the GPUs with the lowest indices.

Without backfill, the first job of a partition that cannot start blocks every
lower-priority job of that partition (reason Priority). With backfill (EASY), that job
gets a reservation: the earliest time and node at which it fits, judged by the time
limits of running jobs; lower-priority jobs may start now only if they end before the
reservation or leave it enough room, so the reserved job is never delayed by them.

With preemption, a job that cannot start and whose QoS may preempt others chooses, on
one node, the running jobs of preemptable QoS whose stop loses the fewest GPU-seconds
of work (jobs younger than the exempt time are spared), and holds their resources.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from podium.sched.deps import DepStatus, evaluate
from podium.sched.model import (
    Allocation,
    Decisions,
    NodeView,
    PendingJob,
    Policy,
    Preempt,
    Reason,
    Reservation,
    Snapshot,
    Start,
)
from podium.sched.priority import Factors, factors

INF = float("inf")


@dataclass
class _Hold:
    """Room kept on a node for a reserved job from `time` on."""

    job_id: int
    time: float
    gpus: int  # free GPUs (of the job's type) left at `time` after the job takes its own
    cpus: int
    mem_mb: int
    user: str = ""
    exclusive: str = "none"


@dataclass
class _Node:
    """A node's free resources during a pass."""

    view: NodeView
    cpus: int
    mem_mb: int
    free_gpus: list[int]
    allocs: list[Allocation] = field(default_factory=list)
    users: set[str] = field(default_factory=set)
    exclusive_node: bool = False
    exclusive_users: set[str] = field(default_factory=set)
    hold: _Hold | None = None
    types: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.types = {g.index: g.type for g in self.view.gpus}

    def take(self, alloc: Allocation) -> None:
        self.cpus -= alloc.cpus
        self.mem_mb -= alloc.mem_mb
        taken = set(alloc.gpu_indices)
        self.free_gpus = [g for g in self.free_gpus if g not in taken]
        self.allocs.append(alloc)
        self.users.add(alloc.user)
        if alloc.exclusive == "node":
            self.exclusive_node = True
        elif alloc.exclusive == "user":
            self.exclusive_users.add(alloc.user)

    def gpus_of(self, gpu_type: str | None) -> list[int]:
        if gpu_type is None:
            return self.free_gpus
        return [g for g in self.free_gpus if self.types[g] == gpu_type]

    def matching(self, indices: Iterable[int], gpu_type: str | None) -> int:
        """How many of these GPU indices are of `gpu_type` (all when None)."""
        if gpu_type is None:
            return sum(1 for _ in indices)
        return sum(1 for g in indices if self.types[g] == gpu_type)


class _Index:
    """Nodes bucketed by how many GPUs they have free, for best-fit lookups."""

    def __init__(self, nodes: Iterable[_Node], max_gpus: int) -> None:
        self.buckets: list[dict[str, _Node]] = [{} for _ in range(max_gpus + 1)]
        for node in nodes:
            self.buckets[len(node.free_gpus)][node.view.name] = node

    def moved(self, node: _Node, before: int) -> None:
        del self.buckets[before][node.view.name]
        self.buckets[len(node.free_gpus)][node.view.name] = node

    def from_size(self, gpus: int) -> Iterable[_Node]:
        for bucket in self.buckets[gpus:]:
            yield from bucket.values()


def priority_key(job: PendingJob, prio: float) -> tuple[float, float, int]:
    """Sort key: higher priority first, then earlier submit, then lower id."""
    return (-prio, job.submit_time, job.job_id)


def _fits_now(job: PendingJob, node: _Node) -> tuple[int, ...] | None:
    """The GPUs `job` would get on `node` now, or None if it does not fit."""
    if job.cpus > node.cpus or job.mem_mb > node.mem_mb or node.exclusive_node:
        return None
    if job.exclusive == "node" and node.users:
        return None
    if node.exclusive_users - {job.user}:
        return None
    if job.exclusive == "user" and node.users - {job.user}:
        return None
    usable = node.gpus_of(job.gpu_type)
    if job.avoid_gpus:
        usable = [g for g in usable if (node.view.name, g) not in job.avoid_gpus]
    if len(usable) < job.gpus:
        return None
    return pick_gpus(usable, job.gpus, node.view.gpu_groups)


def pick_gpus(free: list[int], need: int, groups: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Choose `need` of the `free` GPUs, keeping a job's GPUs close together.

    With a known topology (groups of GPUs behind one NVLink domain or PCIe switch):
    the group that fits the job with the fewest GPUs to spare, so larger groups stay
    whole for larger jobs; when no single group fits, the fewest groups, largest
    first. Without a topology: the lowest indices.
    """
    if need == 0:
        return ()
    if not groups:
        return tuple(sorted(free)[:need])
    free_set = set(free)
    grouped = [sorted(free_set & set(g)) for g in groups]
    seen = {i for g in groups for i in g}
    grouped += [[i] for i in sorted(free_set - seen)]
    grouped = [g for g in grouped if g]
    fitting = [g for g in grouped if len(g) >= need]
    if fitting:
        best = min(fitting, key=lambda g: (len(g), g[0]))
        return tuple(best[:need])
    chosen: list[int] = []
    for g in sorted(grouped, key=lambda g: (-len(g), g[0])):
        chosen.extend(g[: need - len(chosen)])
        if len(chosen) == need:
            break
    return tuple(sorted(chosen))


def _could_ever_fit(job: PendingJob, node: NodeView) -> bool:
    gpus = sum(1 for g in node.gpus if job.gpu_type is None or g.type == job.gpu_type)
    return job.cpus <= node.cpus and job.mem_mb <= node.memory_mb and job.gpus <= gpus


def _respects_hold(job: PendingJob, node: _Node, now: float) -> bool:
    """Starting `job` on `node` now leaves the node's reservation intact."""
    hold = node.hold
    if hold is None:
        return True
    end = now + job.time_limit_s if job.time_limit_s is not None else INF
    if end <= hold.time:
        return True
    if _conflict(job.exclusive, job.user, hold.exclusive, hold.user):
        return False
    return job.gpus <= hold.gpus and job.cpus <= hold.cpus and job.mem_mb <= hold.mem_mb


def _conflict(a_excl: str, a_user: str, b_excl: str, b_user: str) -> bool:
    """Two jobs may not share a node because of --exclusive."""
    if a_excl == "node" or b_excl == "node":
        return True
    return (a_excl == "user" or b_excl == "user") and a_user != b_user


def _earliest_start(job: PendingJob, node: _Node, now: float) -> tuple[float, _Hold] | None:
    """When `job` would fit on `node` as running jobs end by their limits, and the room
    left then; None if never (jobs without a limit hold what it needs)."""
    if not _could_ever_fit(job, node.view):
        return None
    avoid = {g for n, g in job.avoid_gpus if n == node.view.name}
    gpus = sum(1 for g in node.gpus_of(job.gpu_type) if g not in avoid)
    cpus, mem = node.cpus, node.mem_mb
    time = now
    conflicts = [a for a in node.allocs if _conflict(job.exclusive, job.user, a.exclusive, a.user)]
    if conflicts:
        time = max(a.end_estimate for a in conflicts)
        if time == INF:
            return None
    later = []
    for alloc in node.allocs:
        if alloc.end_estimate <= time:
            gpus += node.matching((g for g in alloc.gpu_indices if g not in avoid), job.gpu_type)
            cpus += alloc.cpus
            mem += alloc.mem_mb
        else:
            later.append(alloc)
    for alloc in sorted(later, key=lambda a: a.end_estimate):
        if gpus >= job.gpus and cpus >= job.cpus and mem >= job.mem_mb:
            break
        if alloc.end_estimate == INF:
            return None
        time = max(time, alloc.end_estimate)
        gpus += node.matching((g for g in alloc.gpu_indices if g not in avoid), job.gpu_type)
        cpus += alloc.cpus
        mem += alloc.mem_mb
    if gpus < job.gpus or cpus < job.cpus or mem < job.mem_mb:
        return None
    hold = _Hold(
        job.job_id,
        time,
        gpus - job.gpus,
        cpus - job.cpus,
        mem - job.mem_mb,
        job.user,
        job.exclusive,
    )
    return time, hold


def schedule(snapshot: Snapshot, now: float, policy: Policy | None = None) -> Decisions:
    """Decide which pending jobs start now, which running jobs are preempted, and why
    the others wait.

    Pure: reads only its arguments. Never allocates a GPU twice nor more CPUs or
    memory than a node has; starts all of a job's resources together; never starts a
    job that would delay a reservation.
    """
    policy = policy or Policy()
    nodes = {
        n.name: _Node(n, n.cpus, n.memory_mb, [g.index for g in n.gpus]) for n in snapshot.nodes
    }
    for alloc in snapshot.running:
        if alloc.node in nodes:
            nodes[alloc.node].take(alloc)
    max_gpus = max((len(n.gpus) for n in snapshot.nodes), default=0)
    index = _Index((n for n in nodes.values() if n.view.schedulable), max_gpus)
    cluster_gpus = sum(len(n.gpus) for n in snapshot.nodes)

    # Counters for limits, throttles and singletons.
    user_gpus: dict[tuple[str, str], int] = {}
    user_jobs: dict[tuple[str, str], int] = {}
    account_gpus: dict[str, int] = {}
    array_running: dict[int, int] = {}
    singleton_owner: set[tuple[str, str]] = set()

    def count(
        job_qos: str, user: str, account: str, gpus: int, array: int | None, name: str
    ) -> None:
        user_gpus[(job_qos, user)] = user_gpus.get((job_qos, user), 0) + gpus
        user_jobs[(job_qos, user)] = user_jobs.get((job_qos, user), 0) + 1
        account_gpus[account] = account_gpus.get(account, 0) + gpus
        if array is not None:
            array_running[array] = array_running.get(array, 0) + 1
        singleton_owner.add((user, name))

    for alloc in snapshot.running:
        count(
            alloc.qos,
            alloc.user,
            alloc.account,
            len(alloc.gpu_indices),
            alloc.array_job_id,
            alloc.name,
        )

    # Priorities.
    max_qos = max((j.qos_priority for j in snapshot.pending), default=0)
    max_tier = max(policy.partition_tiers.values(), default=0)
    prios: dict[int, Factors] = {}
    for job in snapshot.pending if policy.use_priority else ():
        prios[job.job_id] = factors(
            weights=policy.weights,
            now=now,
            submit_time=job.submit_time,
            fairshare=snapshot.fairshare.get((job.account, job.user), 1.0),
            qos_priority=job.qos_priority,
            max_qos_priority=max_qos,
            gpus=job.gpus,
            cluster_gpus=cluster_gpus,
            partition_tier=policy.partition_tiers.get(job.partition, 0),
            max_partition_tier=max_tier,
            nice=job.nice,
        )
    if policy.use_priority:
        order = sorted(snapshot.pending, key=lambda j: priority_key(j, prios[j.job_id].total))
    else:
        order = sorted(snapshot.pending, key=lambda j: (j.submit_time, j.job_id))

    starts: list[Start] = []
    reasons: dict[int, str] = {}
    cancels: dict[int, str] = {}
    preempts: list[Preempt] = []
    reservations: list[Reservation] = []
    strict_blocked: set[str] = set()
    has_blocked: set[str] = set()
    reserved: set[str] = set()
    victims: set[int] = {a.job_id for a in snapshot.running if a.preempting}
    partition_nodes: dict[str, list[_Node]] = {}
    no_room: set[tuple[str, int, str | None, int, int, str, str, frozenset[tuple[str, int]]]]
    no_room = set()
    ever_fits: dict[tuple[str, int, str | None, int, int], bool] = {}

    for job in order:
        why = _waits_for(job, snapshot, now, singleton_owner, array_running)
        if why is not None:
            reasons[job.job_id] = why
            if why == Reason.DEPENDENCY_NEVER and job.kill_on_invalid_dep:
                cancels[job.job_id] = why
            continue
        limit = _limit_reason(job, policy, user_gpus, user_jobs, account_gpus)
        if limit is not None:
            reasons[job.job_id] = limit
            continue
        if job.partition in strict_blocked:
            reasons[job.job_id] = Reason.PRIORITY
            continue
        allowed = snapshot.partition_nodes.get(job.partition)
        allowed_set = set(allowed) if allowed is not None else None
        placed = False
        # Free resources only shrink during a pass: a request that fit no node before
        # fits none now, whatever its time limit.
        request = (
            job.partition,
            job.gpus,
            job.gpu_type,
            job.cpus,
            job.mem_mb,
            job.exclusive,
            job.user if job.exclusive == "user" else "",
            job.avoid_gpus,
        )
        fits_somewhere = False
        nodes_to_try = () if request in no_room else index.from_size(job.gpus)
        for node in nodes_to_try:
            if allowed_set is not None and node.view.name not in allowed_set:
                continue
            gpus = _fits_now(job, node)
            if gpus is None:
                continue
            fits_somewhere = True
            if not _respects_hold(job, node, now):
                continue
            before = len(node.free_gpus)
            alloc = job.allocate(node.view.name, gpus, now)
            node.take(alloc)
            index.moved(node, before)
            hold = node.hold
            if hold is not None and not (
                job.time_limit_s is not None and now + job.time_limit_s <= hold.time
            ):
                hold.gpus -= job.gpus
                hold.cpus -= job.cpus
                hold.mem_mb -= job.mem_mb
            starts.append(Start(job.job_id, node.view.name, gpus, job.cpus, job.mem_mb))
            count(job.qos, job.user, job.account, job.gpus, job.array_job_id, job.name)
            placed = True
            break
        if placed:
            continue
        if not fits_somewhere:
            no_room.add(request)

        candidates = partition_nodes.get(job.partition)
        if candidates is None:
            candidates = [
                n
                for n in nodes.values()
                if n.view.schedulable and (allowed_set is None or n.view.name in allowed_set)
            ]
            partition_nodes[job.partition] = candidates
        shape = (job.partition, job.gpus, job.gpu_type, job.cpus, job.mem_mb)
        ever = ever_fits.get(shape)
        if ever is None:
            ever = any(_could_ever_fit(job, n.view) for n in candidates)
            ever_fits[shape] = ever
        if not ever:
            reasons[job.job_id] = Reason.NODE_UNAVAILABLE
            continue
        if policy.preemption and policy.preempts.get(job.qos):
            taken = _preempt_for(job, candidates, policy, now, victims)
            if taken is not None:
                node, chosen = taken
                for alloc in chosen:
                    victims.add(alloc.job_id)
                    mode = policy.preempt_mode.get(alloc.qos, "requeue")
                    preempts.append(Preempt(alloc.job_id, job.job_id, mode))
                node.hold = _Hold(job.job_id, now, 0, 0, 0)  # keep what is freed for it
                reasons[job.job_id] = Reason.RESOURCES
                reservations.append(Reservation(job.job_id, node.view.name, now))
                continue
        blocked_behind = job.partition in has_blocked
        has_blocked.add(job.partition)
        reasons[job.job_id] = Reason.PRIORITY if blocked_behind else Reason.RESOURCES
        if not policy.backfill:
            strict_blocked.add(job.partition)
            continue
        if job.partition in reserved:
            continue
        best: tuple[float, _Node, _Hold] | None = None
        for node in candidates:
            if node.hold is not None:
                continue
            found = _earliest_start(job, node, now)
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], node, found[1])
        if best is None:
            strict_blocked.add(job.partition)  # no end in sight: keep strict order
            continue
        best[1].hold = best[2]
        reserved.add(job.partition)
        reservations.append(Reservation(job.job_id, best[1].view.name, best[0]))
    return Decisions(
        starts=tuple(starts),
        reasons=reasons,
        cancels=cancels,
        preempts=tuple(preempts),
        reservations=tuple(reservations),
        priorities=prios,
    )


def _waits_for(
    job: PendingJob,
    snapshot: Snapshot,
    now: float,
    singleton_owner: set[tuple[str, str]],
    array_running: dict[int, int],
) -> str | None:
    """A reason other than resources for `job` to wait, or None."""
    if job.held:
        return Reason.HELD
    if job.begin_time is not None and job.begin_time > now:
        return Reason.BEGIN_TIME
    if job.dependencies:
        busy = (job.user, job.name) in singleton_owner
        status = evaluate(
            job.dependencies, job.dependency_any, snapshot.job_states, snapshot.array_members, busy
        )
        if any(d.kind == "singleton" for d in job.dependencies):
            singleton_owner.add((job.user, job.name))
        if status is DepStatus.NEVER:
            return Reason.DEPENDENCY_NEVER
        if status is DepStatus.WAITING:
            return Reason.DEPENDENCY
    if (
        job.array_job_id is not None
        and job.array_throttle is not None
        and array_running.get(job.array_job_id, 0) >= job.array_throttle
    ):
        return Reason.ARRAY_LIMIT
    return None


def _limit_reason(
    job: PendingJob,
    policy: Policy,
    user_gpus: dict[tuple[str, str], int],
    user_jobs: dict[tuple[str, str], int],
    account_gpus: dict[str, int],
) -> str | None:
    """The QoS or account limit that holds `job`, or None."""
    limits = policy.qos_limits.get(job.qos)
    if limits is not None:
        key = (job.qos, job.user)
        if (
            limits.max_jobs_per_user is not None
            and user_jobs.get(key, 0) >= limits.max_jobs_per_user
        ):
            return Reason.QOS_JOBS_PER_USER
        if (
            limits.max_gpus_per_user is not None
            and user_gpus.get(key, 0) + job.gpus > limits.max_gpus_per_user
        ):
            return Reason.QOS_GPUS_PER_USER
    cap = policy.account_gpu_limits.get(job.account)
    if cap is not None and account_gpus.get(job.account, 0) + job.gpus > cap:
        return Reason.ACCOUNT_GPUS
    return None


def _preempt_for(
    job: PendingJob,
    candidates: list[_Node],
    policy: Policy,
    now: float,
    victims: set[int],
) -> tuple[_Node, list[Allocation]] | None:
    """The node and the running jobs to stop there so that `job` fits, losing the
    fewest GPU-seconds of work; None when no choice works. Jobs already being
    preempted count as freed (then no new victim is needed on that node)."""
    lower = policy.preempts.get(job.qos, frozenset())
    best: tuple[float, _Node, list[Allocation]] | None = None
    for node in candidates:
        if not _could_ever_fit(job, node.view) or node.hold is not None:
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
