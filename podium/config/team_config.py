"""Config section for team quotas: Kueue's ClusterQueues and cohorts (HyperPod's task
governance) on the embedded cluster.

A team has a GPU quota (Kueue's nominalQuota). Teams of one cohort lend each other
what they leave idle: a team may use more than its quota by borrowing, up to its
`borrowing_limit` (none: as much as the cohort lends), and lends at most its
`lending_limit` (none: all its quota). When a team wants its own quota back, jobs of
teams that borrow are preempted (`reclaim_within_cohort`); a team's high-priority job
may also preempt the team's own lower-priority jobs (`within_team`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from podium.config.common import Closed


class GpuAmount(Closed):
    """An amount of GPUs (the only resource teams are given quotas of)."""

    gpus: int = Field(ge=0)


class Team(Closed):
    """One team: its quota, cohort, limits, weight and members (by user, account or
    Unix group)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    cohort: str | None = Field(
        default=None, pattern=r"^[A-Za-z0-9_.-]+$", description="teams that lend each other"
    )
    quota: GpuAmount
    borrowing_limit: GpuAmount | None = Field(
        default=None, description="most GPUs it may borrow (none: what the cohort lends)"
    )
    lending_limit: GpuAmount | None = Field(
        default=None, description="most of its quota others may borrow (none: all of it)"
    )
    weight: float = Field(
        default=1.0, gt=0, description="its share when teams compete for idle quota"
    )
    users: list[str] = Field(default_factory=list)
    accounts: list[str] = Field(default_factory=list)
    reclaim_within_cohort: Literal["any", "lower_priority", "never"] = Field(
        default="any",
        description="whose jobs it may preempt to get its quota back from borrowers",
    )
    within_team: Literal["lower_priority", "never"] = Field(
        default="never", description="whether its jobs preempt its lower-priority jobs"
    )


def check_teams(teams: Sequence[Team], account_names: Sequence[str]) -> None:
    """Raise ValueError (one line) when teams clash: a name twice, a user or an
    account in two teams, an unknown account, a lending limit above the quota, or
    limits on a team with no cohort."""
    names = [t.name for t in teams]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"team names must be unique: {twice} more than once")
    owner: dict[tuple[str, str], str] = {}
    for team in teams:
        if not team.users and not team.accounts:
            raise ValueError(f"team {team.name} has no members: give it users or accounts")
        for kind, members in (("user", team.users), ("account", team.accounts)):
            for member in members:
                other = owner.setdefault((kind, member), team.name)
                if other != team.name:
                    raise ValueError(f"{kind} {member} is in two teams: {other} and {team.name}")
        unknown = [a for a in team.accounts if account_names and a not in account_names]
        if unknown:
            raise ValueError(f"team {team.name} names unknown account(s) {unknown}")
        if team.lending_limit is not None and team.lending_limit.gpus > team.quota.gpus:
            raise ValueError(
                f"team {team.name} lends at most its quota ({team.quota.gpus} GPUs), "
                f"not {team.lending_limit.gpus}"
            )
        if team.cohort is None and (team.borrowing_limit or team.lending_limit):
            raise ValueError(
                f"team {team.name} has a borrowing or lending limit but no cohort to "
                "borrow from: give it `cohort: NAME`"
            )
