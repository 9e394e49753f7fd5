"""One scheduling pass: priority order, gang allocation, backfill, preemption, limits.

Order: multifactor priority (or submit order when `use_priority` is off; `order`). A
job starts only when all its GPUs, CPUs and memory fit at once, on each of its nodes
for a multi-node gang job; nodes are chosen best-fit by free GPUs (`fit`).

Without backfill, the first job of a partition that cannot start blocks every
lower-priority job of that partition (reason Priority). With backfill (EASY), that job
gets a reservation: the earliest time and node at which it fits, judged by the time
limits of running jobs; lower-priority jobs may start now only if they end before the
reservation or leave it enough room, so the reserved job is never delayed by them
(`backfill`).

With preemption, a job that cannot start and whose QoS may preempt others chooses, on
one node, the running jobs of preemptable QoS whose stop loses the fewest GPU-seconds
of work (jobs younger than the exempt time are spared), and holds their resources
(`preempt`). Limits, holds, begin times, dependencies and array throttles: `limits`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace

from podium.api.states import PreemptMode, Reason
from podium.sched.backfill import INF, reserve, respects_hold, shrink_hold
from podium.sched.elastic import grow_into_free, larger_sizes, shrink_for
from podium.sched.fit import Index, Node, Request, could_ever_fit, fits_now, request_of
from podium.sched.limits import Counters
from podium.sched.model import (
    Allocation,
    Decisions,
    PendingJob,
    Policy,
    Preempt,
    Reservation,
    Resize,
    Snapshot,
    Start,
)
from podium.sched.order import GroupedOrder, priority_key, queue_order
from podium.sched.preempt import NoVictims, preempt_for
from podium.sched.priority import Factors
from podium.sched.reclaim import keep_for, qos_victims, reclaim, shrinkable
from podium.sched.team_ledger import TeamLedger
from podium.sched.team_share import cohort_order

__all__ = ["priority_key", "schedule"]


def schedule(
    snapshot: Snapshot, now: float, policy: Policy | None = None, *, explain: bool = True
) -> Decisions:
    """Decide which pending jobs start now, which running jobs are preempted, and why
    the others wait. With `explain=False` some waiting jobs get no reason (those behind
    a blocked partition, and with `snapshot.groups`, the look-alikes of a job that
    cannot start): a simulator needs only the starts and preemptions, which are the
    same either way.

    Pure: reads only its arguments. Never allocates a GPU twice nor more CPUs or
    memory than a node has; starts all of a job's resources together; never starts a
    job that would delay a reservation.
    """
    policy = policy or Policy()
    nodes = {
        n.name: Node(n, n.cpus, n.memory_mb, [g.index for g in n.gpus]) for n in snapshot.nodes
    }
    counters = Counters()
    for alloc in snapshot.running:
        if alloc.node in nodes:
            nodes[alloc.node].take(alloc)
    cohorts = any(t.cohort for t in policy.teams.teams)  # their jobs are re-sequenced
    grouped = (
        GroupedOrder(snapshot, now, policy)
        if not explain and snapshot.groups and not cohorts
        else None
    )
    has_limits = bool(policy.qos_limits or policy.account_gpu_limits)
    if has_limits or (
        grouped.any_counted
        if grouped is not None
        else any(j.dependencies or j.array_throttle is not None for j in snapshot.pending)
    ):  # what running jobs hold matters only to limits, singletons and array throttles
        per_job: dict[int, tuple[Allocation, int]] = {}  # job -> (an allocation, its GPUs)
        for alloc in snapshot.running:  # a multi-node job counts once, with all its GPUs
            one, total = per_job.get(alloc.job_id, (alloc, 0))
            per_job[alloc.job_id] = (one, total + len(alloc.gpu_indices))
        for one, total in per_job.values():
            counters.count(one.qos, one.user, one.account, total, one.array_job_id, one.name)
    ledger = TeamLedger(policy.teams) if policy.teams.teams else None
    if ledger is not None:
        ledger.count_running(snapshot.running)
    max_gpus = max((len(n.gpus) for n in snapshot.nodes), default=0)
    index = Index((n for n in nodes.values() if n.view.schedulable), max_gpus)
    order: Iterable[PendingJob]
    prios: dict[int, Factors]
    if grouped is not None:
        order, prios = grouped, {}
        partitions, any_dependencies = grouped.partitions, grouped.any_dependencies
    else:
        order, prios = queue_order(snapshot, now, policy, with_factors=explain)
        if cohorts and ledger is not None:
            order = cohort_order(order, policy.teams, ledger.used)
        partitions = len({j.partition for j in order}) if not explain else 0
        any_dependencies = not explain and any(j.dependencies for j in order)
    drop = grouped.drop if grouped is not None else _keep
    drop_as_long = grouped.drop_as_long if grouped is not None else _keep_as_long

    starts: list[Start] = []
    reasons: dict[int, str] = {}
    cancels: dict[int, str] = {}
    preempts: list[Preempt] = []
    reservations: list[Reservation] = []
    resizes: list[Resize] = []
    strict_blocked: set[str] = set()
    has_blocked: set[str] = set()
    reserved: set[str] = set()
    victims: set[int] = {a.job_id for a in snapshot.running if a.preempting}
    partition_nodes: dict[str, list[Node]] = {}
    no_room: set[Request] = set()
    # Requests that fit now but would delay a reservation, with the shortest time limit
    # that did: holds and free room only shrink during a pass, so no longer job can.
    held_back: dict[Request, float] = {}
    no_victims = NoVictims()
    no_reclaim = NoVictims()  # the same, for teams reclaiming quota
    ever_fits: dict[tuple[str, int, int, str | None, int, int], bool] = {}
    allowed_sets = {p: frozenset(n) for p, n in snapshot.partition_nodes.items()}

    def team_of(job: PendingJob) -> str | None:
        """The team whose rules limit `job`'s victims (None: none do)."""
        team = policy.teams.team_of(job.user, job.account) if ledger is not None else None
        return team.name if team is not None else None

    def may_preempt(job: PendingJob) -> bool:
        """Whether `job` may still find victims in this pass."""
        return bool(policy.preemption and policy.preempts.get(job.qos)) and not (
            no_victims.covers(job, team_of(job))
        )

    def candidates_of(job: PendingJob, allowed: frozenset[str] | None) -> list[Node]:
        """The schedulable nodes of `job`'s partition."""
        candidates = partition_nodes.get(job.partition)
        if candidates is None:
            candidates = [
                n
                for n in nodes.values()
                if n.view.schedulable and (allowed is None or n.view.name in allowed)
            ]
            partition_nodes[job.partition] = candidates
        return candidates

    def drop_look_alikes(request: Request) -> None:
        """The job cannot start in this pass: neither can the rest of its group, or
        those of them as long, once the reservation is made (explain=False)."""
        if request in no_room:
            drop()
        elif request in held_back:
            drop_as_long(held_back[request])

    for job in _each_task(order, starts):
        if not explain and job.partition in strict_blocked and not job.dependencies:
            if len(strict_blocked) >= partitions and not any_dependencies:
                break  # every partition is blocked: nothing else can start
            drop()
            continue
        if (
            job.held
            or job.begin_time is not None
            or job.dependencies
            or job.array_throttle is not None
        ):
            why = counters.waits_for(job, snapshot, now)
            if why is not None:
                reasons[job.job_id] = why
                if why == Reason.DEPENDENCY_NEVER and job.kill_on_invalid_dep:
                    cancels[job.job_id] = why
                continue
        if has_limits:
            limit = counters.limit_reason(job, policy)
            if limit is not None:
                reasons[job.job_id] = limit
                drop()  # counts only grow during a pass: its look-alikes are over it too
                continue
        allowed = allowed_sets.get(job.partition)
        if ledger is not None:
            short = ledger.shortfall(job)
            if short is not None:
                reasons[job.job_id] = short.reason
                scope = (team_of(job), short.rule)
                if (
                    policy.preemption
                    and short.may_stop is not None
                    and not no_reclaim.covers(job, scope)
                    and not reclaim(
                        job,
                        short,
                        ledger,
                        candidates_of(job, allowed),
                        policy,
                        now,
                        victims,
                        preempts,
                        reservations,
                        resizes,
                    )
                ):
                    no_reclaim.add(job, scope)
                continue
        if job.partition in strict_blocked:
            reasons[job.job_id] = Reason.PRIORITY
            continue
        # Free resources only shrink during a pass: a request that fit no node before
        # fits none now, whatever its time limit.
        request = request_of(job)
        ends_in = job.time_limit_s if job.time_limit_s is not None else INF
        shortest = held_back.get(request)
        if request in no_room or (shortest is not None and ends_in >= shortest):
            if not explain and job.partition in reserved and not may_preempt(job):
                drop_look_alikes(request)
                continue  # it cannot start, the reservation is made: only its reason is left
        else:
            placed, fitting = None, 0
            for bigger in larger_sizes(job):  # an elastic job starts as large as fits
                if (has_limits and counters.limit_reason(bigger, policy)) or (
                    ledger is not None and ledger.shortfall(bigger)
                ):
                    continue
                placed, _ = _place(bigger, index, allowed, now)
                if placed is not None:
                    job = bigger
                    break
            if placed is None:
                placed, fitting = _place(job, index, allowed, now)
            if placed is not None:
                _take(job, placed, index, now)
                first, *rest = placed
                more = tuple((n.view.name, g) for n, g in rest)
                starts.append(
                    Start(job.job_id, first[0].view.name, first[1], job.cpus, job.mem_mb, more)
                )
                counters.count(
                    job.qos, job.user, job.account, job.total_gpus, job.array_job_id, job.name
                )
                if ledger is not None:
                    ledger.count(job.user, job.account, job.total_gpus)
                continue
            if fitting < job.nodes:
                no_room.add(request)
            else:  # it fits, but would delay a reservation: so would any longer job
                held_back[request] = min(ends_in, held_back.get(request, INF))

        candidates = candidates_of(job, allowed)
        shape = (job.partition, job.nodes, job.gpus, job.gpu_type, job.cpus, job.mem_mb)
        ever = ever_fits.get(shape)
        if ever is None:
            ever = _enough_nodes(job, candidates)
            ever_fits[shape] = ever
        if not ever:
            reasons[job.job_id] = Reason.NODE_UNAVAILABLE
            drop()
            continue
        if policy.preemption and (
            shrunk := shrink_for(
                job, candidates, policy, now, victims, shrinkable(job, policy, ledger, now)
            )
        ):
            node, shrinks = shrunk  # elastic jobs give up replicas instead of a victim
            victims.update(r.job_id for r in shrinks)
            resizes.extend(shrinks)
            keep_for(job, node, now, reservations)
            reasons[job.job_id] = Reason.RESOURCES
            continue
        if may_preempt(job):
            taken = preempt_for(
                job,
                candidates,
                qos_victims(job, policy, ledger),
                policy.preempt_exempt_s,
                now,
                victims,
            )
            if taken is None:
                no_victims.add(job, team_of(job))
            else:
                node, chosen = taken
                for alloc in chosen:
                    victims.add(alloc.job_id)
                    mode = policy.preempt_mode.get(alloc.qos, PreemptMode.REQUEUE)
                    preempts.append(Preempt(alloc.job_id, job.job_id, mode))
                keep_for(job, node, now, reservations)
                reasons[job.job_id] = Reason.RESOURCES
                continue
        blocked_behind = job.partition in has_blocked
        has_blocked.add(job.partition)
        reasons[job.job_id] = Reason.PRIORITY if blocked_behind else Reason.RESOURCES
        if not policy.backfill:
            strict_blocked.add(job.partition)
            continue
        if job.partition in reserved:
            if not explain and not may_preempt(job):
                drop_look_alikes(request)  # the next of them would stop above
            continue
        got = reserve(job, candidates, now)
        if got is None:
            strict_blocked.add(job.partition)  # no end in sight: keep strict order
            continue
        reserved.add(job.partition)
        reservations.append(Reservation(job.job_id, got[1][0].view.name, got[0]))
    if policy.preemption and not any(r in _WAITING_FOR_ROOM for r in reasons.values()):

        def fits_quota(alloc: Allocation, gpus: int) -> bool:
            more = PendingJob(alloc.job_id, alloc.user, alloc.name, "", 0, 0.0, gpus=gpus,
                              qos=alloc.qos, account=alloc.account)  # fmt: skip
            return counters.gpu_limit_reason(alloc.qos, alloc.user, alloc.account, gpus,
                                             policy) is None and (
                ledger is None or ledger.shortfall(more) is None)  # fmt: skip

        running = [a for a in snapshot.running if a.elastic is not None and a.job_id not in victims]
        ending = frozenset(a.node for a in snapshot.running if a.ending)
        resizes.extend(grow_into_free(running, nodes, policy, now, fits_quota, ending))
    return Decisions(
        resizes=tuple(resizes),
        starts=tuple(starts),
        reasons=reasons,
        cancels=cancels,
        preempts=tuple(preempts),
        reservations=tuple(reservations),
        priorities=prios,
    )


_WAITING_FOR_ROOM = frozenset({Reason.RESOURCES, Reason.PRIORITY})


def _each_task(order: Iterable[PendingJob], starts: list[Start]) -> Iterator[PendingJob]:
    """Each job of `order`; a job standing for several tasks (`count`) again after each
    of its tasks that started, until all have or one does not (what held that one
    back holds the rest: its reason is theirs)."""
    for job in order:
        for _ in range(job.count):
            before = len(starts)
            yield job
            if len(starts) == before:
                break


def _keep() -> None:
    """Without groups there is nothing to drop: each job is looked at anyway."""


def _keep_as_long(limit: float) -> None:
    """Likewise."""


def _enough_nodes(job: PendingJob, candidates: list[Node]) -> bool:
    """Whether `job.nodes` of the candidates could hold its share when empty."""
    found = 0
    for node in candidates:
        if could_ever_fit(job, node.view):
            found += 1
            if found >= job.nodes:
                return True
    return False


def _place(
    job: PendingJob, index: Index, allowed: frozenset[str] | None, now: float
) -> tuple[list[tuple[Node, tuple[int, ...]]] | None, int]:
    """Where `job` starts now: one (node, GPUs) per node it asks for, or None; and on
    how many nodes its share fits now (reservations aside)."""
    chosen: list[tuple[Node, tuple[int, ...]]] = []
    fitting = 0
    for node in index.from_size(job.gpus):
        if allowed is not None and node.view.name not in allowed:
            continue
        gpus = fits_now(job, node)
        if gpus is None:
            continue
        fitting += 1
        if not respects_hold(job, node, now):
            continue
        chosen.append((node, gpus))
        if len(chosen) == job.nodes:
            return chosen, fitting
    return None, fitting


def _take(
    job: PendingJob, placed: list[tuple[Node, tuple[int, ...]]], index: Index, now: float
) -> None:
    """Give `job` what `_place` chose, node by node."""
    for node, gpus in placed:
        before = len(node.free_gpus)
        node.take(replace(job.allocate(node.view.name, gpus, now), starting=True))
        index.moved(node, before)
        shrink_hold(job, node, now)
