"""The stages of a scheduling pass (podium.sched.core.Pass), each a function of the
pass and one job with one job of its own, in the order `STAGES` runs them:

1. `skip_blocked`: explain=False, its partition strictly blocked: dropped (or the pass
   ends when every partition is);
2. `wait`: held, a begin time, dependencies, an array throttle (`limits`);
3. `limit`: QoS and account limits;
4. `team_quota`: its team's quota, reclaiming lent quota with preemption;
5. `behind_blocked`: its partition strictly blocked: Priority;
6. `start_now`: placed and started now, as large as fits if elastic;
7. `never_fits`: no node of its partition could ever hold it;
8. `shrink_others`: elastic jobs give up replicas for it;
9. `preempt`: victims of a preemptable QoS, or (least attained service) of more
   service, make room;
10. `reserve`: Resources or Priority, and with backfill its reservation.

A stage decides the job (DONE), ends the pass (STOP) or hands it on (NEXT). After the
order, `grow` lets running elastic jobs grow into what is left. Pure, as the pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from enum import Enum
from typing import TYPE_CHECKING

from podium.api.states import PreemptMode, Reason
from podium.sched.backfill import INF, respects_hold, shrink_hold
from podium.sched.backfill import reserve as reservation_for
from podium.sched.elastic import grow_into_free, larger_sizes, shrink_for
from podium.sched.fit import Index, Node, choices_now, could_ever_fit, fits_now, request_of
from podium.sched.fragmentation import CANDIDATES, FragmentationContext, least_fragmenting
from podium.sched.las import victims as las_victims
from podium.sched.model import Allocation, PendingJob, Preempt, Reservation, Start
from podium.sched.preempt import preempt_for
from podium.sched.reclaim import keep_for, qos_victims, reclaim, shrinkable

if TYPE_CHECKING:
    from podium.sched.core import Pass


class Verdict(Enum):
    """What a stage made of a job."""

    NEXT = "next"  # not decided here: the next stage looks at it
    DONE = "done"  # decided (started, or its reason given): the next job
    STOP = "stop"  # nothing else can start in this pass


NEXT, DONE, STOP = Verdict.NEXT, Verdict.DONE, Verdict.STOP
_WAITING_FOR_ROOM = frozenset({Reason.RESOURCES, Reason.PRIORITY})


def skip_blocked(p: Pass, job: PendingJob) -> Verdict:
    """explain=False: a job of a strictly blocked partition cannot start; when
    every partition is blocked (and nothing waits on a dependency), the pass ends."""
    if p.explain or job.partition not in p.strict_blocked or job.dependencies:
        return NEXT
    if len(p.strict_blocked) >= p.partitions and not p.any_dependencies:
        return STOP
    p.drop()
    return DONE


def wait(p: Pass, job: PendingJob) -> Verdict:
    """Held, not yet begun, waiting on dependencies or its array's throttle."""
    if not (
        job.held or job.begin_time is not None or job.dependencies or job.array_throttle is not None
    ):
        return NEXT
    why = p.counters.waits_for(job, p.snapshot, p.now)
    if why is None:
        return NEXT
    p.reasons[job.job_id] = why
    if why == Reason.DEPENDENCY_NEVER and job.kill_on_invalid_dep:
        p.cancels[job.job_id] = why
    return DONE


def limit(p: Pass, job: PendingJob) -> Verdict:
    """Over a QoS or account limit."""
    if not p.has_limits:
        return NEXT
    why = p.counters.limit_reason(job, p.policy)
    if why is None:
        return NEXT
    p.reasons[job.job_id] = why
    p.drop()  # counts only grow during a pass: its look-alikes are over it too
    return DONE


def team_quota(p: Pass, job: PendingJob) -> Verdict:
    """Beyond its team's quota: it waits, and with preemption reclaims the quota
    its team lent (`reclaim`)."""
    ledger, policy = p.ledger, p.policy
    if ledger is None:
        return NEXT
    short = ledger.shortfall(job)
    if short is None:
        return NEXT
    p.reasons[job.job_id] = short.reason
    scope = (p.team_of(job), short.rule)
    if (
        policy.preemption
        and short.may_stop is not None
        and not p.no_reclaim.covers(job, scope)
        and not reclaim(
            job,
            short,
            ledger,
            p.candidates_of(job),
            policy,
            p.now,
            p.victims,
            p.preempts,
            p.reservations,
            p.resizes,
        )
    ):
        p.no_reclaim.add(job, scope)
    return DONE


def behind_blocked(p: Pass, job: PendingJob) -> Verdict:
    """Its partition is in strict order behind a job that could not start."""
    if job.partition not in p.strict_blocked:
        return NEXT
    p.reasons[job.job_id] = Reason.PRIORITY
    return DONE


def start_now(p: Pass, job: PendingJob) -> Verdict:
    """Placed now (an elastic job as large as fits and its limits allow) and
    started; else noted: no room for its request, or room that would delay a
    reservation. Free resources only shrink during a pass: a request that fit no
    node before fits none now, whatever its time limit."""
    request = request_of(job)
    ends_in = job.time_limit_s if job.time_limit_s is not None else INF
    shortest = p.held_back.get(request)
    if request in p.no_room or (shortest is not None and ends_in >= shortest):
        if (
            not p.explain
            and job.partition in p.reserved
            and not p.may_preempt(job)
            and not p.overdue(job)  # it holds a reservation of its own (`reserve`)
        ):
            p.drop_look_alikes(request)
            return DONE  # it cannot start, the reservation is made: only its reason is left
        return NEXT
    allowed = p.allowed_sets.get(job.partition)
    placed, fitting = None, 0
    for bigger in larger_sizes(job):  # an elastic job starts as large as fits
        if (p.has_limits and p.counters.limit_reason(bigger, p.policy)) or (
            p.ledger is not None and p.ledger.shortfall(bigger)
        ):
            continue
        placed, _ = _place(bigger, p.index, allowed, p.now, p.fragmentation())
        if placed is not None:
            job = bigger
            break
    if placed is None:
        placed, fitting = _place(job, p.index, allowed, p.now, p.fragmentation())
    if placed is not None:
        _start(p, job, placed)
        return DONE
    if fitting < job.nodes:
        p.no_room.add(request)
    else:  # it fits, but would delay a reservation: so would any longer job
        p.held_back[request] = min(ends_in, p.held_back.get(request, INF))
    return NEXT


def _start(p: Pass, job: PendingJob, placed: list[tuple[Node, tuple[int, ...]]]) -> None:
    """Give `job` what `_place` chose, and count it."""
    _take(job, placed, p.index, p.now)
    first, *rest = placed
    more = tuple((n.view.name, g) for n, g in rest)
    p.starts.append(Start(job.job_id, first[0].view.name, first[1], job.cpus, job.mem_mb, more))
    p.counters.count(job.qos, job.user, job.account, job.total_gpus, job.array_job_id, job.name)
    if p.ledger is not None:
        p.ledger.count(job.user, job.account, job.total_gpus)


def never_fits(p: Pass, job: PendingJob) -> Verdict:
    """No node of its partition could hold it even empty: ReqNodeNotAvail."""
    shape = (job.partition, job.nodes, job.gpus, job.gpu_type, job.cpus, job.mem_mb)
    ever = p.ever_fits.get(shape)
    if ever is None:
        ever = _enough_nodes(job, p.candidates_of(job))
        p.ever_fits[shape] = ever
    if ever:
        return NEXT
    p.reasons[job.job_id] = Reason.NODE_UNAVAILABLE
    p.drop()
    return DONE


def shrink_others(p: Pass, job: PendingJob) -> Verdict:
    """With preemption, elastic jobs give up replicas for it instead of a victim."""
    policy = p.policy
    if not policy.preemption:
        return NEXT
    shrunk = shrink_for(
        job, p.candidates_of(job), policy, p.now, p.victims,
        shrinkable(job, policy, p.ledger, p.now),
    )  # fmt: skip
    if not shrunk:
        return NEXT
    node, shrinks = shrunk
    p.victims.update(r.job_id for r in shrinks)
    p.resizes.extend(shrinks)
    keep_for(job, node, p.now, p.reservations)
    p.reasons[job.job_id] = Reason.RESOURCES
    return DONE


def preempt(p: Pass, job: PendingJob) -> Verdict:
    """Its QoS may preempt, or it has had less service than running jobs that save
    (least attained service): the running jobs whose stop loses least make room.
    Least attained service stops nothing in a partition where a job overdue by its wait
    guard waits (overdue jobs come first, so the pass knows by then)."""
    policy, las = p.policy, p.policy.las
    if p.overdue(job):
        p.overdue_waiting.add(job.partition)
    if not p.may_preempt(job):
        return NEXT
    taken = None
    if policy.preempts.get(job.qos):
        taken = preempt_for(
            job, p.candidates_of(job), qos_victims(job, policy, p.ledger),
            policy.preempt_exempt_s, p.now, p.victims,
        )  # fmt: skip
    by_service = False
    if taken is None and las is not None and job.partition not in p.overdue_waiting:
        by_service = True
        stoppable = las_victims(job, p.now, las, p.attained(), policy.qos_priority)
        taken = preempt_for(job, p.candidates_of(job), stoppable, las.min_run_s, p.now, p.victims)
    if taken is None:
        p.no_victims.add(job, p.victim_scope(job))
        return NEXT
    node, chosen = taken
    for alloc in chosen:
        p.victims.add(alloc.job_id)
        mode = (
            PreemptMode.REQUEUE  # it saves when told to: it comes back with its work
            if by_service
            else policy.preempt_mode.get(alloc.qos, PreemptMode.REQUEUE)
        )
        p.preempts.append(Preempt(alloc.job_id, job.job_id, mode))
    keep_for(job, node, p.now, p.reservations)
    p.reasons[job.job_id] = Reason.RESOURCES
    return DONE


def reserve(p: Pass, job: PendingJob) -> Verdict:
    """It waits: Resources (the first of its partition) or Priority. Without
    backfill its partition is blocked from here on; with backfill the first such
    job gets a reservation (its partition stays strict when none can be made), and
    so does every job overdue by least attained service's wait guard, on nodes not
    yet reserved (as Slurm's backfill reserves for each job it tests): a large
    overdue job keeps its place while smaller overdue ones come and go before it."""
    blocked_behind = job.partition in p.has_blocked
    p.has_blocked.add(job.partition)
    p.reasons[job.job_id] = Reason.PRIORITY if blocked_behind else Reason.RESOURCES
    if not p.policy.backfill:
        p.strict_blocked.add(job.partition)
        return DONE
    if job.partition in p.reserved and not p.overdue(job):  # an overdue job: one of its own
        if not p.explain and not p.may_preempt(job):
            p.drop_look_alikes(request_of(job))  # the next of them would stop above
        return DONE
    got = reservation_for(job, p.candidates_of(job), p.now)
    if got is None:
        if job.partition not in p.reserved:
            p.strict_blocked.add(job.partition)  # no end in sight: keep strict order
        return DONE
    p.reserved.add(job.partition)
    p.reservations.append(Reservation(job.job_id, got[1][0].view.name, got[0]))
    return DONE


def grow(p: Pass) -> None:
    """With preemption and no job waiting for room, running elastic jobs grow into
    what is free (within their QoS, account and team limits)."""
    policy, snapshot, counters, ledger = p.policy, p.snapshot, p.counters, p.ledger
    if not policy.preemption or any(r in _WAITING_FOR_ROOM for r in p.reasons.values()):
        return

    def fits_quota(alloc: Allocation, gpus: int) -> bool:
        more = PendingJob(alloc.job_id, alloc.user, alloc.name, "", 0, 0.0, gpus=gpus,
                          qos=alloc.qos, account=alloc.account)  # fmt: skip
        return counters.gpu_limit_reason(alloc.qos, alloc.user, alloc.account, gpus,
                                         policy) is None and (
            ledger is None or ledger.shortfall(more) is None)  # fmt: skip

    victims = p.victims
    running = [a for a in snapshot.running if a.elastic is not None and a.job_id not in victims]
    ending = frozenset(a.node for a in snapshot.running if a.ending)
    p.resizes.extend(grow_into_free(running, p.nodes, policy, p.now, fits_quota, ending))


Stage = Callable[["Pass", PendingJob], Verdict]
STAGES: tuple[Stage, ...] = (
    skip_blocked, wait, limit, team_quota, behind_blocked, start_now, never_fits,
    shrink_others, preempt, reserve,
)  # fmt: skip


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
    job: PendingJob,
    index: Index,
    allowed: frozenset[str] | None,
    now: float,
    fgd: FragmentationContext | None = None,
) -> tuple[list[tuple[Node, tuple[int, ...]]] | None, int]:
    """Where `job` starts now: one (node, GPUs) per node it asks for, or None; and on
    how many nodes its share fits now (reservations aside). With `fgd`, a single-node
    job goes where it fragments least (`podium.sched.fragmentation`), else best fit."""
    if fgd is not None and job.nodes == 1:
        return _place_least_fragmenting(job, index, allowed, now, fgd)
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


def _place_least_fragmenting(
    job: PendingJob,
    index: Index,
    allowed: frozenset[str] | None,
    now: float,
    fgd: FragmentationContext,
) -> tuple[list[tuple[Node, tuple[int, ...]]] | None, int]:
    """`_place` for one node, choosing among every node and GPU that fit."""
    options: list[tuple[Node, tuple[int, ...]]] = []
    fitting = weighed = 0
    for node in index.from_size(job.gpus):
        if allowed is not None and node.view.name not in allowed:
            continue
        if weighed >= CANDIDATES:  # enough to choose from (and it starts: `fitting`
            break  # matters only when it does not)
        ways = choices_now(job, node)
        if not ways:
            continue
        fitting += 1
        if respects_hold(job, node, now):
            weighed += 1
            options += [(node, gpus) for gpus in ways]
    if not options:
        return None, fitting
    return [options[least_fragmenting(options, fgd)]], fitting


def _take(
    job: PendingJob, placed: list[tuple[Node, tuple[int, ...]]], index: Index, now: float
) -> None:
    """Give `job` what `_place` chose, node by node."""
    for node, gpus in placed:
        before = len(node.free_gpus)
        node.take(replace(job.allocate(node.view.name, gpus, now), starting=True))
        index.moved(node, before)
        shrink_hold(job, node, now)


__all__ = ["DONE", "NEXT", "STAGES", "STOP", "Stage", "Verdict", "grow"]
