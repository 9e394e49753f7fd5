"""Making room for one job by stopping others: a team reclaiming its quota (elastic
borrowers shrink first, then the jobs that lose least are preempted), whom a job may
preempt or shrink by QoS within the teams' rules, and the hold a pass keeps on the
node whose victims or shrinks free room for the job. Pure."""

from __future__ import annotations

from collections.abc import Callable

from podium.api.states import PreemptMode
from podium.sched.elastic import may_shrink, shrink_for
from podium.sched.fit import Hold, Node
from podium.sched.model import Allocation, PendingJob, Policy, Preempt, Reservation, Resize
from podium.sched.preempt import lower_qos, preempt_for
from podium.sched.team_ledger import Shortfall, TeamLedger


def reclaim(
    job: PendingJob,
    short: Shortfall,
    ledger: TeamLedger,
    candidates: list[Node],
    policy: Policy,
    now: float,
    victims: set[int],
    preempts: list[Preempt],
    reservations: list[Reservation],
    resizes: list[Resize],
) -> bool:
    """Shrink elastic borrowers, else preempt the jobs, whose stop gives `job` its
    team's quota back (and room on a node), losing the least work; nothing when GPUs
    on their way out cover it already or no choice works. False only for the last:
    no larger job of its team and rule finds any either in this pass."""
    assert short.may_stop is not None
    if ledger.reclaiming(job, short.need):
        return True
    shrunk = shrink_for(job, candidates, policy, now, victims, short.may_stop, short.need)
    if shrunk is not None:  # elastic borrowers give back replicas first
        node, shrinks = shrunk
        for resize in shrinks:
            victims.add(resize.job_id)
            ledger.freeing_add(next(a for a in node.allocs if a.job_id == resize.job_id))
        resizes.extend(shrinks)
        keep_for(job, node, now, reservations)
        return True
    taken = preempt_for(
        job, candidates, short.may_stop, policy.preempt_exempt_s, now, victims, short.need
    )
    if taken is None:
        return False
    node, chosen = taken
    for alloc in chosen:
        victims.add(alloc.job_id)
        ledger.freeing_add(alloc)
        mode = policy.preempt_mode.get(alloc.qos, PreemptMode.REQUEUE)
        preempts.append(Preempt(alloc.job_id, job.job_id, mode))
    keep_for(job, node, now, reservations)
    return True


def qos_victims(
    job: PendingJob, policy: Policy, ledger: TeamLedger | None
) -> Callable[[Allocation], bool]:
    """Whom `job` may preempt by QoS: lower QoS, and within the teams' rules."""
    lower = lower_qos(job, policy)
    teams = ledger.across_teams(job) if ledger is not None else None
    return lower if teams is None else (lambda a: lower(a) and teams(a))


def shrinkable(
    job: PendingJob, policy: Policy, ledger: TeamLedger | None, now: float
) -> Callable[[Allocation], bool] | None:
    """Whose replicas `job` may take, where teams limit it (None: by QoS alone)."""
    teams = ledger.across_teams(job) if ledger is not None else None
    if teams is None:
        return None
    return lambda a: may_shrink(job, a, policy, now) and teams(a)


def keep_for(job: PendingJob, node: Node, now: float, reservations: list[Reservation]) -> None:
    """Hold `node` for `job` from now on: what its victims or shrinks free is its."""
    node.hold = Hold(job.job_id, now, 0, 0, 0)
    reservations.append(Reservation(job.job_id, node.view.name, now))
