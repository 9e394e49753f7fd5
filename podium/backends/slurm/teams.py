"""Team quotas on Slurm: what Slurm's associations can hold of a `teams:` config, as
sacctmgr commands (`podium slurm teams [--apply]`), and the one line that refuses the
rest.

Each team is an account under root whose association carries the quota as
`GrpTRES=gres/gpu=N` (a cap over every job in its subtree, enforced by slurmctld
under `AccountingStorageEnforce=limits`), its weight as `Fairshare=` (shares in
Slurm's multifactor priority) and the config's QoS (each a Slurm QoS with its
priority, preemption and per-user limits). A team's `accounts:` become child accounts of it, so
the cap covers them; its `users:` get an association with the team's account (their
default account when sacctmgr adds them new). What Slurm cannot express is refused:
lending and borrowing between teams (a cohort of two or more teams: GrpTRES is a
fixed cap, and Slurm has no cohorts) and preemption within one team
(`within_team: lower_priority`: Slurm preempts by QoS across the whole cluster).
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterator, Sequence

from podium.backends.slurm.engine_api import SlurmError
from podium.config.access import Qos
from podium.config.cluster import ClusterConfig
from podium.config.team_config import Team

# Slurm keeps account names in lower case; user names are Unix names.
_ACCOUNT = re.compile(r"[a-z0-9_][a-z0-9_.-]{0,63}")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\$?")


def refusal(config: ClusterConfig) -> str | None:
    """The one line saying which part of `config.teams` Slurm cannot hold and what to
    give instead; None when it can hold all of it (or there are no teams)."""
    cohorts = Counter(t.cohort for t in config.teams if t.cohort is not None)
    for team in config.teams:
        if team.cohort is not None and cohorts[team.cohort] > 1:
            return (
                f"teams: team {team.name} shares cohort {team.cohort} with another team, "
                "but Slurm cannot lend one team's idle GPUs to another (no cohorts; "
                "GrpTRES is a fixed cap): remove cohort: so that each team keeps to its "
                "quota, or use backend: embedded or kubernetes"
            )
        if team.within_team != "never":
            return (
                f"teams: team {team.name} has within_team: {team.within_team}, but Slurm "
                "preempts by QoS across the whole cluster (PreemptType=preempt/qos), not "
                "within one account: set within_team: never"
            )
        if not _ACCOUNT.fullmatch(team.name):
            return (
                f"teams: team name {team.name!r} cannot be a Slurm account: give lower-case "
                "letters, digits, '_', '.' or '-' (Slurm keeps account names in lower case)"
            )
        for account in team.accounts:
            if not _ACCOUNT.fullmatch(account):
                return (
                    f"teams: team {team.name}'s account {account!r} cannot be a Slurm "
                    "account: give lower-case letters, digits, '_', '.' or '-'"
                )
        for user in team.users:
            if not _USER.fullmatch(user):
                return (
                    f"teams: team {team.name}'s user {user!r} is not a user name: give "
                    "letters, digits, '_', '.' or '-'"
                )
    return None


def sacctmgr_commands(config: ClusterConfig) -> list[list[str]]:
    """The sacctmgr argvs that make `config.qos` into Slurm QoS (priority, whom they
    preempt and how, per-user limits) and `config.teams` into associations on the
    cluster `config.cluster_name`, in order: the QoS, then each team's account, its
    limits and QoS, its member accounts and users. Each is safe to run again.
    Raises ValueError (one line) when Slurm cannot hold them: `refusal`'s, or a QoS
    open only to listed users or groups."""
    why = refusal(config)
    if why is not None:
        raise ValueError(why)
    for qos in config.qos:
        if qos.allow_users or qos.allow_groups:
            raise ValueError(
                f"qos {qos.name} has allow_users/allow_groups, but Slurm grants a QoS to "
                "associations, not to a list of users or Unix groups: drop the lists and "
                f"grant it with `sacctmgr modify user NAME set qos+={qos.name}`"
            )
    cluster = config.cluster_name.lower()
    commands = [c for qos in config.qos for c in _qos_commands(qos)]
    names = ",".join(q.name for q in config.qos)
    for team in config.teams:
        commands += _team_commands(team, cluster, names, config.default_qos)
    return commands


def _qos_commands(qos: Qos) -> list[list[str]]:
    """A QoS and its settings; limits it does not set are cleared (-1)."""

    def limit(value: int | None) -> str:
        return "-1" if value is None else str(value)

    gpus = f"gres/gpu={limit(qos.max_gpus_per_user)}"
    return [
        ["sacctmgr", "-i", "add", "qos", qos.name],
        ["sacctmgr", "-i", "modify", "qos", "where", f"name={qos.name}", "set",
         f"Priority={qos.priority}", f"Preempt={','.join(qos.preempt)}",
         f"PreemptMode={qos.preempt_mode}", f"MaxTRESPerUser={gpus}",
         f"MaxJobsPerUser={limit(qos.max_jobs_per_user)}",
         f"MaxSubmitJobsPerUser={limit(qos.max_submit_jobs_per_user)}"],
    ]  # fmt: skip


def _team_commands(team: Team, cluster: str, qos: str, default_qos: str) -> list[list[str]]:
    where = ["where", f"name={team.name}", f"cluster={cluster}"]
    out = [
        ["sacctmgr", "-i", "add", "account", team.name, f"cluster={cluster}", "parent=root",
         f"Description=podium team {team.name}", "Organization=podium"],
        ["sacctmgr", "-i", "modify", "account", *where, "set",
         f"GrpTRES=gres/gpu={team.quota.gpus}", f"Fairshare={_shares(team.weight)}",
         f"QOS={qos}", f"DefaultQOS={default_qos}"],
    ]  # fmt: skip
    for account in team.accounts:
        if account == team.name:
            continue
        out += [
            ["sacctmgr", "-i", "add", "account", account, f"cluster={cluster}",
             f"parent={team.name}", f"Description=podium team {team.name}",
             "Organization=podium"],
            ["sacctmgr", "-i", "modify", "account", "where", f"name={account}",
             f"cluster={cluster}", "set", f"parent={team.name}"],
        ]  # fmt: skip
    for user in team.users:
        out.append(
            ["sacctmgr", "-i", "add", "user", user, f"account={team.name}",
             f"cluster={cluster}", f"DefaultAccount={team.name}"]
        )  # fmt: skip
    return out


def _shares(weight: float) -> int:
    """Slurm's Fairshare is a whole number of shares: a weight of 1 is 100 shares."""
    return max(1, round(weight * 100))


def script(commands: Sequence[Sequence[str]]) -> str:
    """The commands as a shell script an administrator can read and run."""
    lines = ["#!/bin/sh", "# Team quotas as Slurm associations (podium slurm teams)."]
    lines += [shlex.join(c) for c in commands]
    return "\n".join(lines) + "\n"


# What sacctmgr says, with a non-zero exit, when the command changes nothing.
_ALREADY = ("Nothing new added", "Nothing modified")


def apply(commands: Sequence[Sequence[str]], run: Callable[[list[str]], str]) -> Iterator[str]:
    """Run each command with `run` (SlurmTools.run: stdout, or SlurmError with Slurm's
    words), yielding one line per command as it is done. "Nothing new added" and
    "Nothing modified" (it was so already) are no failure; any other SlurmError goes
    up, after the lines of the commands before it."""
    for argv in commands:
        try:
            run(list(argv))
            verb = "done"
        except SlurmError as exc:
            if not any(words in str(exc) for words in _ALREADY):
                raise
            verb = "as is"
        yield f"{verb}: {shlex.join(argv[2:])}"


def team_of_job(config: ClusterConfig, account: str) -> str | None:
    """The team a Slurm job counts against: the team whose account (or one of whose
    member accounts) it runs under; None for other accounts. A member user's job
    under another account is not the team's: GrpTRES caps accounts, not users."""
    for team in config.teams:
        if account == team.name or account in team.accounts:
            return team.name
    return None


__all__ = ["apply", "refusal", "sacctmgr_commands", "script", "team_of_job"]
