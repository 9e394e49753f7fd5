"""Multifactor job priority, as Slurm's priority/multifactor plugin computes it.

    priority = w_age * age + w_fairshare * fairshare + w_qos * qos + w_jobsize * size
               + w_partition * partition_tier - nice

Each factor is normalised to [0, 1]: age grows linearly to 1 at `max_age_s`; fairshare
comes from `podium.sched.fairshare`; qos is the job's QoS priority over the highest
QoS priority; size is the job's GPUs over the cluster's (favouring large jobs when
weighted; its weight is 0 by default, as Slurm's PriorityWeightJobSize; `favor_small`
inverts it); partition_tier is the partition's tier over the highest tier. With a
`shortness` weight, jobs asking for less GPU-time come first (`shortness_of`, with a
starvation guard). Pure: the clock is an argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class PriorityWeights:
    """Weights of each factor (Slurm's PriorityWeight*) and the age cap."""

    age: float = 1000.0
    fairshare: float = 10000.0
    qos: float = 100000.0
    jobsize: float = 0.0  # Slurm's default PriorityWeightJobSize: size does not order jobs
    partition: float = 1000000.0
    max_age_s: float = 7 * 86400.0
    favor_small: bool = False
    shortness: float = 0.0  # shortest-first: weight of the requested GPU-time's level
    starve_after_s: float | None = None  # a job waiting longer counts as the shortest


def limit_level(time_limit_s: float | None) -> float:
    """A time limit rounded down to a power of two (its level: 100 s and 120 s are
    alike, 100 s and 1,000 s are not); 0 for no limit. Jobs alike in all else but
    within one level keep submit order, so a queue can be walked by groups."""
    if time_limit_s is None or time_limit_s <= 0:
        return 0.0
    return float(2 ** math.floor(math.log2(max(1.0, time_limit_s))))


def shortness_of(
    gpus: int, time_limit_s: float | None, waited_s: float, starve_after_s: float | None
) -> float:
    """The shortest-first factor in [0, 1]: 1 for the least requested GPU-time (GPUs
    times the limit's level), falling by the logarithm of it (Tiresias' discretised
    queues, by requested rather than attained service), 0 with no limit; 1 once the job
    has waited `starve_after_s` (the starvation guard)."""
    if starve_after_s is not None and waited_s >= starve_after_s:
        return 1.0
    level = limit_level(time_limit_s)
    if not level:
        return 0.0
    return max(0.0, 1.0 - math.log2(1.0 + max(1, gpus) * level) / 40.0)


@dataclass(frozen=True)
class Factors:
    """One job's normalised factors and weighted total (what `podium priority` shows)."""

    age: float
    fairshare: float
    qos: float
    jobsize: float
    partition: float
    nice: int
    total: float
    shortness: float = 0.0


def factors(
    *,
    weights: PriorityWeights,
    now: float,
    submit_time: float,
    fairshare: float,
    qos_priority: int,
    max_qos_priority: int,
    gpus: int,
    cluster_gpus: int,
    partition_tier: int,
    max_partition_tier: int,
    nice: int,
    time_limit_s: float | None = None,
) -> Factors:
    """The factors of one job and its total priority (higher starts first)."""
    age = min(1.0, max(0.0, now - submit_time) / weights.max_age_s) if weights.max_age_s else 0.0
    qos = qos_priority / max_qos_priority if max_qos_priority > 0 else 0.0
    size = min(1.0, gpus / cluster_gpus) if cluster_gpus > 0 else 0.0
    if weights.favor_small:
        size = 1.0 - size
    tier = partition_tier / max_partition_tier if max_partition_tier > 0 else 0.0
    short = 0.0
    if weights.shortness:
        short = shortness_of(gpus, time_limit_s, now - submit_time, weights.starve_after_s)
    return Factors(
        age, fairshare, qos, size, tier, nice,
        total(weights, age, fairshare, qos, size, tier, nice, short), short,
    )  # fmt: skip


def total(
    weights: PriorityWeights,
    age: float,
    fairshare: float,
    qos: float,
    size: float,
    tier: float,
    nice: int,
    short: float = 0.0,
) -> float:
    """The weighted sum of normalised factors: a job's priority."""
    return (
        weights.age * age
        + weights.fairshare * fairshare
        + weights.qos * qos
        + weights.jobsize * size
        + weights.partition * tier
        - nice
        + weights.shortness * short
    )
