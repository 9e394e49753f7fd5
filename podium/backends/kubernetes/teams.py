"""Podium's accounts and QoS -> Kueue's team quotas. Pure: no I/O.

Each account becomes a team:
- a Namespace `PREFIX<account>` labelled `podium.dev/account`;
- a ClusterQueue of that name in one cohort, admitting that namespace only;
- a LocalQueue `default` in the namespace.

**Quotas.** The cluster's GPUs, CPUs and memory are split by the accounts' shares
(Slurm's fair-share shares become Kueue's nominal quotas). Rounding goes to the
largest shares first, so every GPU is someone's. A team borrows what the others leave
idle, up to its `max_gpus` when one is set (`borrowingLimit = max_gpus - nominal`). It
lends all its quota, and gets it back by preemption: `reclaimWithinCohort: Any`,
Kueue's reclaim, as HyperPod task governance does.

**Priorities.** Each QoS becomes a WorkloadPriorityClass with its priority as value.
Within a team, lower priority work is preempted for higher
(`withinClusterQueue: LowerPriority`).

With no accounts configured, there is one team, `default`, with everything.

**Teams.** When the config has `teams:`, they are the ClusterQueues instead of the
accounts, with their own GPU quotas, cohorts, borrowing and lending limits and
preemption choices; CPUs and memory are split in proportion to their GPU quotas. A
team without a cohort joins `--cohort` with `borrowingLimit: 0` and
`lendingLimit: 0`: it neither borrows nor lends, as on the embedded cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from podium.backends.kubernetes.translate import dns_label
from podium.config.access import Account
from podium.config.cluster import ClusterConfig
from podium.config.team_config import Team

ACCOUNT_LABEL = "podium.dev/account"
KUEUE = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class Capacity:
    """What the cluster has in all, shared among the teams."""

    gpus: int
    cpus: int
    memory_gi: int


def split(total: int, shares: list[int]) -> list[int]:
    """`total` split in proportion to `shares` (largest remainders first; all of it
    goes to someone when any share is positive)."""
    weight = sum(shares)
    if weight == 0:
        return [0] * len(shares)
    exact = [total * s / weight for s in shares]
    parts = [int(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - parts[i]), -shares[i], i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


@dataclass(frozen=True)
class Member:
    """One ClusterQueue to make: a team (config `teams:`) or an account."""

    name: str
    gpus: int
    cohort: str
    limits: dict[str, int]  # borrowingLimit, lendingLimit of its GPUs
    preemption: tuple[str, str]  # reclaimWithinCohort, withinClusterQueue
    weight: float = 1.0  # fairSharing.weight: used where Kueue's fair sharing is enabled


def _account_limits(account: Account, gpus: int) -> dict[str, int]:
    return {} if account.max_gpus is None else {"borrowingLimit": max(0, account.max_gpus - gpus)}


def _gpu_limits(team: Team) -> dict[str, int]:
    limits = {}
    if team.cohort is None:  # no cohort: it borrows from and lends to no one
        return {"borrowingLimit": 0, "lendingLimit": 0}
    if team.borrowing_limit is not None:
        limits["borrowingLimit"] = team.borrowing_limit.gpus
    if team.lending_limit is not None:
        limits["lendingLimit"] = team.lending_limit.gpus
    return limits


def _choices(team: Team) -> tuple[str, str]:
    words = {"any": "Any", "lower_priority": "LowerPriority", "never": "Never"}
    return words[team.reclaim_within_cohort], words[team.within_team]


def teams(
    config: ClusterConfig, capacity: Capacity, prefix: str = "team-", cohort: str = "podium"
) -> list[dict[str, Any]]:
    """The manifests, in the order to apply them: priority classes, the flavor,
    namespaces, cluster queues, local queues."""
    if config.teams:
        members = [Member(t.name, t.quota.gpus, t.cohort or cohort, _gpu_limits(t), _choices(t),
                          t.weight) for t in config.teams]  # fmt: skip
        quotas = [t.quota.gpus for t in config.teams]
        gpus = quotas
    else:
        accounts = config.accounts or [Account(name="default")]
        shares = [a.shares for a in accounts]
        gpus = split(capacity.gpus, shares)
        quotas = shares
        members = [
            Member(a.name, g, cohort, _account_limits(a, g), ("Any", "LowerPriority"))
            for a, g in zip(accounts, gpus, strict=True)
        ]
    cpus = split(capacity.cpus, quotas)
    memory = split(capacity.memory_gi, quotas)
    flavor = dns_label(config.node.gpus.type or "default-flavor")
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": KUEUE,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": dns_label(q.name)},
            "value": q.priority,
            "description": f"Podium QoS {q.name}",
        }
        for q in config.qos
    ]
    docs.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor}})
    queues: list[dict[str, Any]] = []
    for member, g, c, m in zip(members, gpus, cpus, memory, strict=True):
        name = dns_label(f"{prefix}{member.name}")
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {ACCOUNT_LABEL: dns_label(member.name)}},
            }
        )
        queues.append(_cluster_queue(name, member, flavor, g, c, m))
        queues.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "default", "namespace": name},
                "spec": {"clusterQueue": name},
            }
        )
    return docs + queues


def _cluster_queue(
    name: str, member: Member, flavor: str, gpus: int, cpus: int, memory_gi: int
) -> dict[str, Any]:
    """A team's ClusterQueue: its nominal quota of one flavor, its limits, its cohort,
    its fair-sharing weight and how it preempts; only its namespace submits to it."""
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus, **member.limits}
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {ACCOUNT_LABEL: dns_label(member.name)}},
        "spec": {
            "cohortName": dns_label(member.cohort),
            "fairSharing": {"weight": f"{member.weight:g}"},
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}},
            "preemption": {
                "reclaimWithinCohort": member.preemption[0],
                "withinClusterQueue": member.preemption[1],
            },
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": flavor,
                            "resources": [
                                {"name": "cpu", "nominalQuota": cpus},
                                {"name": "memory", "nominalQuota": f"{memory_gi}Gi"},
                                gpu,
                            ],
                        }
                    ],
                }
            ],
        },
    }
