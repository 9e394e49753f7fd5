"""Team quotas that lend and borrow: Kueue's ClusterQueue and cohort arithmetic, pure.

Each team has a GPU quota. Of it, `lendable` GPUs go into its cohort's pool (all of it
unless a lending limit says less) and the rest is `guaranteed` to it alone. A team's
use beyond its guaranteed GPUs draws on the pool, so a job of team T with g GPUs fits
when:

- T's use plus g stays within its quota plus its borrowing limit (none: no limit but
  the pool), and
- the cohort's draw on the pool, with T's use grown by g, stays within the pool.

A team without a cohort simply stays within its quota. Jobs of users and accounts in
no team are not held by quotas. When a job fits its own quota but the pool is spent
by teams that borrow, it may reclaim: preempt borrowers' jobs (`reclaim_within_cohort`
"any", or only those of lower QoS priority with "lower_priority"); a team over its own
quota may preempt its own lower-priority jobs (`within_team`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from podium.sched.model import Allocation, PendingJob, TeamQuota, TeamRules
from podium.sched.team_share import may_take_from, share


@dataclass(frozen=True)
class Shortfall:
    """Why a job does not fit its team's quota: `reason` with the numbers, `need` the
    GPUs that must be freed for it, and whom it may preempt for them (None: no one)."""

    reason: str
    need: int
    may_stop: Callable[[Allocation], bool] | None
    rule: str = ""  # which rule chose may_stop: its team's jobs alike share it in a pass


class TeamLedger:
    """The GPUs each team uses during one pass (running jobs, then each start)."""

    def __init__(self, rules: TeamRules) -> None:
        self.rules = rules
        self.used: dict[str, int] = {t.name: 0 for t in rules.teams}
        self.freeing: dict[str, int] = {t.name: 0 for t in rules.teams}
        self._cohorts: dict[str, list[TeamQuota]] = {}
        for team in rules.teams:
            if team.cohort is not None:
                self._cohorts.setdefault(team.cohort, []).append(team)

    def count(self, user: str, account: str, gpus: int, preempting: bool = False) -> None:
        """Charge `gpus` to the team of (user, account), if any; `preempting`: they
        are being freed already (a victim on its way out)."""
        team = self.rules.team_of(user, account)
        if team is not None:
            self.used[team.name] += gpus
            if preempting:
                self.freeing[team.name] += gpus

    def freeing_add(self, alloc: Allocation) -> None:
        """`alloc` was chosen as a victim: its GPUs are on their way out."""
        team = self.rules.team_of(alloc.user, alloc.account)
        if team is not None:
            self.freeing[team.name] += len(alloc.gpu_indices)

    def count_running(self, running: Iterable[Allocation]) -> None:
        """Charge every running job, each allocation by its GPUs."""
        for alloc in running:
            self.count(alloc.user, alloc.account, len(alloc.gpu_indices), alloc.preempting)

    def pool(self, cohort: str, grow: tuple[str, int] | None = None) -> tuple[int, int]:
        """(drawn, size) of a cohort's pool; `grow` adds GPUs to one team's use first."""
        drawn = size = 0
        for team in self._cohorts.get(cohort, []):
            used = self.used[team.name]
            if grow is not None and grow[0] == team.name:
                used += grow[1]
            drawn += max(0, used - team.guaranteed)
            size += team.lendable
        return drawn, size

    def borrowed(self, team: TeamQuota) -> int:
        """GPUs it uses beyond its quota."""
        return max(0, self.used[team.name] - team.quota)

    def lent(self, team: TeamQuota) -> int:
        """GPUs of its idle lendable quota that borrowers use now: the cohort's
        borrowing, handed out over its lenders in config order."""
        if team.cohort is None:
            return 0
        borrowing = sum(self.borrowed(t) for t in self._cohorts[team.cohort])
        for lender in self._cohorts[team.cohort]:
            idle = max(0, min(lender.lendable, lender.quota - self.used[lender.name]))
            share = min(idle, borrowing)
            if lender.name == team.name:
                return share
            borrowing -= share
        return 0

    def shortfall(self, job: PendingJob) -> Shortfall | None:
        """None when `job` fits its team's quota now (or it is in no team)."""
        team = self.rules.team_of(job.user, job.account)
        if team is None:
            return None
        gpus = job.total_gpus
        used = self.used[team.name]
        within_quota = used + gpus <= team.quota
        if team.cohort is None:
            if within_quota:
                return None
            return Shortfall(
                f"{_held}: team {team.name} uses {used} of its {team.quota} GPUs and has no "
                "cohort to borrow from",
                used + gpus - team.quota,
                self._own_lower(team, job),
                "own",
            )
        drawn, size = self.pool(team.cohort, (team.name, gpus))
        over_limit = (
            team.borrowing_limit is not None and used + gpus > team.quota + team.borrowing_limit
        )
        if drawn <= size and not over_limit:
            return None
        before, _ = self.pool(team.cohort)
        lends = max(0, size - before)
        room = max(0, team.quota - used)
        may_borrow = lends if team.borrowing_limit is None else min(
            lends, max(0, team.quota + team.borrowing_limit - used)
        )  # fmt: skip
        reason = (
            f"{_held}: team {team.name} uses {used} of its {team.quota} GPUs and may "
            f"borrow {max(0, may_borrow - room)} more: {team.cohort} lends {lends}"
        )
        if over_limit:
            return Shortfall(reason, used + gpus - team.quota - (team.borrowing_limit or 0),
                             self._own_lower(team, job), "own")  # fmt: skip
        need = drawn - size
        if within_quota and team.reclaim_within_cohort != "never":
            return Shortfall(reason, need, self._borrowers(team, job), "borrowers")
        if self.rules.fair_sharing and team.reclaim_within_cohort != "never":
            return Shortfall(reason, need, self._above_share(team, job), "share")
        return Shortfall(reason, need, self._own_lower(team, job), "own")

    def reclaiming(self, job: PendingJob, need: int) -> bool:
        """Whether GPUs already on their way out cover `need` for `job`'s team."""
        team = self.rules.team_of(job.user, job.account)
        if team is None:
            return False
        if team.cohort is None:
            return self.freeing[team.name] >= need
        return sum(self.freeing[t.name] for t in self._cohorts[team.cohort]) >= need

    def across_teams(self, job: PendingJob) -> Callable[[Allocation], bool] | None:
        """Which running jobs `job` may stop by QoS (preempt or shrink) as far as teams
        go: jobs of no team, of its own team, or of a team that borrows now (what it
        would take is lent, not that team's own quota). None: any (`job` is in no
        team). Kueue's rule: a workload never preempts another ClusterQueue's
        workloads within their nominal quota; else the victim's team, within its
        quota, would reclaim the GPUs straight back."""
        team = self.rules.team_of(job.user, job.account)
        if team is None:
            return None
        borrowing = {t.name for t in self.rules.teams if self.used[t.name] > t.quota}

        def may_stop(alloc: Allocation) -> bool:
            victim = self.rules.team_of(alloc.user, alloc.account)
            return victim is None or victim.name == team.name or victim.name in borrowing

        return may_stop

    def _borrowers(self, team: TeamQuota, job: PendingJob) -> Callable[[Allocation], bool]:
        """Jobs of the cohort's other teams that borrow (and of lower priority when the
        team reclaims only from those)."""
        lower_only = team.reclaim_within_cohort == "lower_priority"
        borrowing = {
            t.name
            for t in self._cohorts.get(team.cohort or "", [])
            if t.name != team.name and self.borrowed(t) > 0
        }
        own_lower = self._own_lower(team, job)

        def may_stop(alloc: Allocation) -> bool:
            victim = self.rules.team_of(alloc.user, alloc.account)
            if victim is None or victim.name not in borrowing:
                return own_lower is not None and own_lower(alloc)
            return not lower_only or self._lower(alloc, job)

        return may_stop

    def _above_share(self, team: TeamQuota, job: PendingJob) -> Callable[[Allocation], bool]:
        """Under fair sharing, for a job that would borrow: jobs of teams whose share
        stays at least its team's without them (`team_share.may_take_from`), of lower
        priority when the team reclaims only from those; and its team's own lower ones
        when it preempts within itself."""
        lower_only = team.reclaim_within_cohort == "lower_priority"
        own_lower = self._own_lower(team, job)
        used = dict(self.used)
        gpus = job.total_gpus

        def may_stop(alloc: Allocation) -> bool:
            if own_lower is not None and own_lower(alloc):
                return True
            if lower_only and not self._lower(alloc, job):
                return False
            return may_take_from(self.rules, used, team, gpus, alloc)

        return may_stop

    def _own_lower(self, team: TeamQuota, job: PendingJob) -> Callable[[Allocation], bool] | None:
        """The team's own jobs of lower priority, when the team preempts within itself."""
        if team.within_team != "lower_priority":
            return None

        def may_stop(alloc: Allocation) -> bool:
            victim = self.rules.team_of(alloc.user, alloc.account)
            return victim is not None and victim.name == team.name and self._lower(alloc, job)

        return may_stop

    def _lower(self, alloc: Allocation, job: PendingJob) -> bool:
        return self.rules.qos_priority.get(alloc.qos, 0) < job.qos_priority


_held = "AssocGrpGRES"  # Slurm's word for a group GPU limit; the numbers follow


def team_table(
    rules: TeamRules, running: Iterable[Allocation], pending: Iterable[PendingJob]
) -> list[dict[str, object]]:
    """Each team's quota, limits, use, borrowed and lent GPUs, and what waits (the
    GPUs and jobs of its pending jobs), in config order: `podium teams`."""
    ledger = TeamLedger(rules)
    ledger.count_running(running)
    waiting: dict[str, tuple[int | None, int]] = {t.name: (0, 0) for t in rules.teams}
    for job in pending:
        team = rules.team_of(job.user, job.account)
        if team is not None:
            gpus, jobs = waiting[team.name]
            waiting[team.name] = ((gpus or 0) + job.total_gpus * job.count, jobs + job.count)
    return team_rows(ledger, waiting)


def team_rows(
    ledger: TeamLedger, waiting: Mapping[str, tuple[int | None, int]]
) -> list[dict[str, object]]:
    """The records of `podium teams` from a ledger whose `used` is filled in, and each
    team's waiting (GPUs, jobs); GPUs None where the backend cannot tell."""
    return [
        {
            "name": t.name,
            "cohort": t.cohort,
            "quota_gpus": t.quota,
            "borrowing_limit_gpus": t.borrowing_limit,
            "lending_limit_gpus": t.lending_limit,
            "weight": t.weight,
            "share": _finite(share(t, ledger.used[t.name])),
            "used_gpus": ledger.used[t.name],
            "borrowed_gpus": ledger.borrowed(t),
            "lent_gpus": ledger.lent(t),
            "pending_gpus": waiting.get(t.name, (0, 0))[0],
            "pending_jobs": waiting.get(t.name, (0, 0))[1],
            "users": sorted(t.users),
            "accounts": sorted(t.accounts),
        }
        for t in ledger.rules.teams
    ]


def _finite(value: float) -> float | None:
    """A share for JSON: None for infinite (a team of weight 0 that borrows)."""
    return None if value == float("inf") else round(value, 3)
