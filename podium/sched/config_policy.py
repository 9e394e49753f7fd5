"""From the cluster config to the scheduler's Policy and fair-share tree (pure: what
the daemon, the simulator and the Slurm and Kubernetes backends schedule or report by)."""

from __future__ import annotations

from collections.abc import Iterable

from podium.api.states import PreemptMode
from podium.api.timefmt import parse_duration
from podium.config.cluster import ClusterConfig
from podium.sched import accounting
from podium.sched.fairshare import Association
from podium.sched.model import LasRules, Policy, QosLimits, TeamQuota, TeamRules
from podium.sched.priority import PriorityWeights


def policy_from_config(config: ClusterConfig) -> Policy:
    """The Policy a daemon with this config schedules by."""
    p = config.priority
    return Policy(
        use_priority=True,
        backfill=config.scheduler.backfill,
        preemption=config.scheduler.preemption,
        weights=PriorityWeights(
            age=p.weight_age,
            fairshare=p.weight_fairshare,
            qos=p.weight_qos,
            jobsize=p.weight_jobsize,
            partition=p.weight_partition,
            max_age_s=float(parse_duration(p.max_age) or 0),
            favor_small=p.favor_small,
            shortness=p.weight_shortness,
            starve_after_s=float(parse_duration(p.starve_after) or 0) if p.starve_after else None,
        ),
        preempts={q.name: frozenset(q.preempt) for q in config.qos if q.preempt},
        preempt_mode={q.name: PreemptMode(q.preempt_mode) for q in config.qos},
        preempt_exempt_s=config.scheduler.preempt_exempt_s,
        qos_limits={
            q.name: QosLimits(q.max_gpus_per_user, q.max_jobs_per_user)
            for q in config.qos
            if q.max_gpus_per_user is not None or q.max_jobs_per_user is not None
        },
        account_gpu_limits={a.name: a.max_gpus for a in config.accounts if a.max_gpus is not None},
        partition_tiers={p.name: p.priority_tier for p in config.partitions},
        qos_priority={q.name: q.priority for q in config.qos},
        elastic_min_stable_s=config.elastic.seconds(config.elastic.min_stable),
        elastic_grow_delay_s=config.elastic.seconds(config.elastic.grow_delay),
        teams=team_rules(config),
        las=las_rules(config),
    )


def las_rules(config: ClusterConfig) -> LasRules | None:
    """Least attained service's rules, when the config orders the queue by it."""
    if config.scheduler.order != "las":
        return None
    las = config.scheduler.las
    return LasRules(
        tuple(las.queue_limits),
        las.min_run_s,
        las.starve_factor,
        wait_factor=las.wait_factor,
        wait_floor_s=las.wait_floor_s,
        wait_cap_s=las.wait_cap_s,
    )


def team_rules(config: ClusterConfig) -> TeamRules:
    """The config's teams as the scheduler reads them."""
    return TeamRules(
        tuple(
            TeamQuota(
                name=t.name,
                quota=t.quota.gpus,
                cohort=t.cohort,
                borrowing_limit=t.borrowing_limit.gpus if t.borrowing_limit else None,
                lending_limit=t.lending_limit.gpus if t.lending_limit else None,
                weight=t.weight,
                users=frozenset(t.users),
                accounts=frozenset(t.accounts),
                reclaim_within_cohort=t.reclaim_within_cohort,
                within_team=t.within_team,
            )
            for t in config.teams
        ),
        {q.name: q.priority for q in config.qos},
        fair_sharing=config.team_fair_sharing,
    )


def share_tree(config: ClusterConfig, seen: Iterable[tuple[str, str]]) -> Association:
    """root -> accounts -> users: the configured ones with their shares, plus every
    (account, user) seen in jobs or usage with one share each."""
    return accounting.share_tree(
        {a.name: a.shares for a in config.accounts},
        {a.name: {u.name: u.shares for u in a.users} for a in config.accounts},
        seen,
    )


def half_life_s(config: ClusterConfig) -> float:
    return float(parse_duration(config.fairshare.half_life) or 0)
