"""Multifactor job priority, as Slurm's priority/multifactor plugin computes it.

    priority = w_age * age + w_fairshare * fairshare + w_qos * qos + w_jobsize * size
               + w_partition * partition_tier - nice

Each factor is normalised to [0, 1]: age grows linearly to 1 at `max_age_s`; fairshare
comes from `podium.sched.fairshare`; qos is the job's QoS priority over the highest
QoS priority; size is the job's GPUs over the cluster's (favouring large jobs, as
Slurm's default does; `favor_small` inverts it); partition_tier is the partition's
tier over the highest tier. Pure: the clock is an argument.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PriorityWeights:
    """Weights of each factor (Slurm's PriorityWeight*) and the age cap."""

    age: float = 1000.0
    fairshare: float = 10000.0
    qos: float = 100000.0
    jobsize: float = 1000.0
    partition: float = 1000000.0
    max_age_s: float = 7 * 86400.0
    favor_small: bool = False


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
) -> Factors:
    """The factors of one job and its total priority (higher starts first)."""
    age = min(1.0, max(0.0, now - submit_time) / weights.max_age_s) if weights.max_age_s else 0.0
    qos = qos_priority / max_qos_priority if max_qos_priority > 0 else 0.0
    size = min(1.0, gpus / cluster_gpus) if cluster_gpus > 0 else 0.0
    if weights.favor_small:
        size = 1.0 - size
    tier = partition_tier / max_partition_tier if max_partition_tier > 0 else 0.0
    return Factors(
        age, fairshare, qos, size, tier, nice, total(weights, age, fairshare, qos, size, tier, nice)
    )


def total(
    weights: PriorityWeights,
    age: float,
    fairshare: float,
    qos: float,
    size: float,
    tier: float,
    nice: int,
) -> float:
    """The weighted sum of normalised factors: a job's priority."""
    return (
        weights.age * age
        + weights.fairshare * fairshare
        + weights.qos * qos
        + weights.jobsize * size
        + weights.partition * tier
        - nice
    )
