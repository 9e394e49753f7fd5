"""A node's GPUs and health as `podium nodes` (and the dashboard's grid) show them:
each whole GPU and MIG slice with the job holding it, a GPU shared by shards or MPS
once with its units and jobs, and each one's health label."""

from __future__ import annotations

from typing import Any

from podium.node.inventory import GpuInfo
from podium.recover.ladder import Health
from podium.server.local_node import LocalNode


def health_json(h: Health, recovery: str) -> dict[str, Any]:
    """A node's or GPU's health as `podium nodes` shows it."""
    return {
        "label": h.label.value,
        "fenced": h.fenced,
        "fault": h.fault,
        "reason": h.reason,
        "since": h.since,
        "last_deep_check": h.deep,
        "recovery": recovery,
    }


def gpu_records(
    node: LocalNode, owner: dict[int, int], health: dict[int | None, Health], recovery: str
) -> list[dict[str, Any]]:
    """The node's GPUs as `podium nodes` lists them: each whole GPU and MIG slice with
    the job holding it; a GPU shared by shards or MPS once, with its units and jobs."""
    out: list[dict[str, Any]] = []
    shared: dict[int, dict[str, Any]] = {}
    for g in node.devices:
        if g.kind in ("shard", "mps"):
            share = shared.get(g.physical)
            if share is None:
                share = shared[g.physical] = {"kind": g.kind, "units": 0, "used": 0, "jobs": []}
                parent = next(p for p in node.gpus if p.index == g.physical)
                out.append(_gpu_record(parent, None, share, node.name, health, recovery))
            share["units"] += 1
            job = owner.get(g.index)
            if job is not None:
                share["used"] += 1
                if job not in share["jobs"]:
                    share["jobs"].append(job)
            continue
        out.append(_gpu_record(g, owner.get(g.index), None, node.name, health, recovery))
    return out


def _gpu_record(
    g: GpuInfo,
    job_id: int | None,
    share: dict[str, Any] | None,
    node: str,
    health: dict[int | None, Health],
    recovery: str,
) -> dict[str, Any]:
    return {
        "index": g.index,
        "type": g.type,
        "memory_mb": g.memory_mb,
        "uuid": g.uuid,
        "bus_id": g.bus_id,
        "parent": g.parent,
        "mig_start": g.start,
        "share": share,
        "job_id": job_id,
        "health": health_json(health.get(g.physical, Health(node, g.physical)), recovery),
    }


__all__ = ["gpu_records", "health_json"]
