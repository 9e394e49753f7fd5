"""Fair sharing of a cohort's idle quota between teams, by weight: Kueue's fair sharing
and HyperPod task governance's fair-share mode, pure.

A team's share is what it borrows over its weight: `max(0, used - quota) / weight`
(Kueue's dominant resource share for one resource, GPUs, without the cohort's
constant). With fair sharing on:

- **Admission.** Jobs that would borrow are considered in order of the share their
  team would have once they run, lowest first, instead of by priority alone: the team
  that borrows least for its weight gets the next idle GPUs (`cohort_order`).
- **Preemption.** A job that would borrow may preempt borrowing jobs of another team of
  its cohort when that team's share, with the victim gone, stays at least the share
  the job's team will have (Kueue's `LessThanOrEqualToFinalShare`): the shares meet,
  and the other team cannot take the GPUs back at once (`may_take_from`).

Without fair sharing, borrowers go in priority order and never preempt each other, as
Kueue does by default (HyperPod's "first-come first-serve"). Either way, a cohort's
jobs within their team's quota go before its jobs that would borrow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from podium.sched.model import Allocation, PendingJob, TeamQuota, TeamRules


def share(team: TeamQuota, used: int) -> float:
    """`team`'s share when it uses `used` GPUs: what it borrows over its weight (a
    weight of 0, Kueue's "borrow last", makes any borrowing infinite)."""
    borrowed = max(0, used - team.quota)
    if team.weight <= 0:
        return float("inf") if borrowed else 0.0
    return borrowed / team.weight


def cohort_order(
    order: Sequence[PendingJob], rules: TeamRules, used: Mapping[str, int]
) -> list[PendingJob]:
    """`order` with each cohort's jobs re-sequenced in the places its jobs hold: first
    those within their team's quota (in `order`), then those that would borrow, by
    their team's share after them, lowest first, under fair sharing (ties and
    otherwise: in `order`). Kueue orders a cohort's workloads so too: one that fits
    its own quota before any that borrows, so that GPUs reclaimed for an owner go to
    the owner, not back to the borrower they were taken from. `used` is each team's
    GPUs in use; the pending jobs are projected to start in order, so that a team's
    second job may borrow where its first did not."""
    projected = dict(used)
    places: dict[str, list[int]] = {}  # cohort -> positions of its jobs in `order`
    within: dict[str, list[PendingJob]] = {}
    borrowing: dict[str, list[tuple[float, int, PendingJob]]] = {}
    for position, job in enumerate(order):
        team = rules.team_of(job.user, job.account)
        if team is None or team.cohort is None:
            continue
        after = projected[team.name] + job.total_gpus * max(1, job.count)
        projected[team.name] = after
        places.setdefault(team.cohort, []).append(position)
        if after <= team.quota:
            within.setdefault(team.cohort, []).append(job)
        else:
            key = share(team, after) if rules.fair_sharing else 0.0
            borrowing.setdefault(team.cohort, []).append((key, position, job))
    if not places:
        return list(order)
    result = list(order)
    for cohort, positions in places.items():
        jobs = within.get(cohort, []) + [j for *_, j in sorted(borrowing.get(cohort, []))]
        for position, job in zip(positions, jobs, strict=True):
            result[position] = job
    return result


def may_take_from(
    rules: TeamRules, used: Mapping[str, int], team: TeamQuota, gpus: int, victim: Allocation
) -> bool:
    """Whether a job of `team` that needs `gpus` more may preempt `victim` under fair
    sharing: the victim's team is another team of the cohort that borrows, and its
    share without the victim stays at least `team`'s share with the job."""
    other = rules.team_of(victim.user, victim.account)
    if other is None or other.name == team.name or other.cohort != team.cohort:
        return False
    if used[other.name] <= other.quota:
        return False
    without = share(other, used[other.name] - len(victim.gpu_indices))
    return without >= share(team, used[team.name] + gpus)
