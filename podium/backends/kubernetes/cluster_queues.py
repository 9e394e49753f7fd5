"""Kueue's ClusterQueues read as Podium's teams (`podium teams` on Kubernetes). Pure.

A ClusterQueue is a team: its GPU quota is the sum of `nominalQuota` of
`nvidia.com/gpu` over its flavors, with their borrowing and lending limits; its use
and borrowing come from `status.flavorsUsage`, its waiting jobs from
`status.pendingWorkloads` (Kueue does not say how many GPUs they ask for). What it
lends is worked out as on the embedded cluster (`sched.team_ledger.TeamLedger.lent`).
"""

from __future__ import annotations

from typing import Any

from podium.backends.kubernetes.parse import quantity
from podium.sched.model import TeamQuota, TeamRules
from podium.sched.team_ledger import TeamLedger, team_rows

GPU = "nvidia.com/gpu"


def _gpu_sum(groups: list[dict[str, Any]], key: str) -> int | None:
    """The sum of `key` over the GPU resources of every flavor; None when none sets it."""
    values = [
        quantity(r[key])
        for group in groups
        for flavor in group.get("flavors", [])
        for r in flavor.get("resources", [])
        if r.get("name") == GPU and key in r
    ]
    return int(sum(values)) if values else None


def gpu_room(queue: dict[str, Any]) -> tuple[int, int]:
    """A ClusterQueue's nominal GPU quota and the GPUs its admitted workloads use (from
    Kueue's own status)."""
    nominal = _gpu_sum((queue.get("spec") or {}).get("resourceGroups", []), "nominalQuota")
    used = sum(
        quantity(r.get("total", 0))
        for flavor in (queue.get("status") or {}).get("flavorsUsage", [])
        for r in flavor.get("resources", [])
        if r.get("name") == GPU
    )
    return nominal or 0, int(used)


def queue_teams(queues: list[dict[str, Any]]) -> list[dict[str, object]]:
    """`podium teams` records for these ClusterQueues, by name."""
    teams: list[TeamQuota] = []
    used: dict[str, int] = {}
    pending: dict[str, tuple[int | None, int]] = {}
    for queue in sorted(queues, key=lambda q: str(q["metadata"]["name"])):
        name = str(queue["metadata"]["name"])
        spec, status = queue.get("spec", {}), queue.get("status", {})
        groups = spec.get("resourceGroups", [])
        teams.append(
            TeamQuota(
                name=name,
                quota=_gpu_sum(groups, "nominalQuota") or 0,
                cohort=spec.get("cohortName") or spec.get("cohort"),
                borrowing_limit=_gpu_sum(groups, "borrowingLimit"),
                lending_limit=_gpu_sum(groups, "lendingLimit"),
                reclaim_within_cohort=_words(spec, "reclaimWithinCohort", "never"),
                within_team=_words(spec, "withinClusterQueue", "never"),
                weight=_weight(spec),
            )
        )
        used[name] = gpu_room(queue)[1]
        pending[name] = (None, int(status.get("pendingWorkloads", 0)))
    ledger = TeamLedger(TeamRules(tuple(teams)))
    ledger.used.update(used)
    return team_rows(ledger, pending)


def _words(spec: dict[str, Any], key: str, default: str) -> str:
    """Kueue's preemption choice (Any, LowerPriority, Never) in Podium's words."""
    value = str(spec.get("preemption", {}).get(key, ""))
    return {"Any": "any", "LowerPriority": "lower_priority", "Never": "never"}.get(value, default)


def _weight(spec: dict[str, Any]) -> float:
    """A ClusterQueue's fair-sharing weight (Kueue's default, 1, when unset or unreadable;
    0 is Kueue's "borrows last", shown as 0)."""
    try:
        return float(quantity((spec.get("fairSharing") or {}).get("weight", 1)))
    except (TypeError, ValueError):
        return 1.0
