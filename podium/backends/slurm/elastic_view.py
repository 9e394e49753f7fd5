"""An elastic job on Slurm as one Podium job: its members' Slurm jobs folded into the
record of the job Podium named (their nodes, GPUs and CPUs added to its own), and the
keeper's record (`elastic.json`) read into it: replicas, their bounds, the resizes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podium.backends.slurm.elastic_slurm import MEMBER_TAG
from podium.run.files import read_json_safely

_ELASTIC_KEYS = ("replicas", "replicas_min", "replicas_max", "resizes", "resize_log")
# the keeper's "nodes": rank r's node at index r


def member_of(record: dict[str, Any]) -> int | None:
    """The elastic job `record` is a member of (None: it is no member)."""
    comment = str(record.get("comment") or "")
    rest = comment[len(MEMBER_TAG) :]
    return int(rest) if comment.startswith(MEMBER_TAG) and rest.isdigit() else None


def fold_members(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`records` with every member's running node, GPUs and CPUs added to its job's
    record, and the members themselves left out. Anyone may write any --comment, so a
    job is a member only of a listed job of its own user's; any other job carrying
    the tag is listed as itself."""
    jobs = {r["job_id"]: r for r in records if member_of(r) is None}
    members = []
    for record in records:
        leader = jobs.get(member_of(record) or -1)
        if leader is None or leader.get("uid") != record.get("uid"):
            continue
        members.append(record)
        if record["state"] != "RUNNING" or "COMPLETING" in record.get("slurm_state", ""):
            continue  # a member given up is no part of the job, even while it ends
        leader["nodes"] = [*leader["nodes"], *record["nodes"]]
        leader["node_count"] = len(leader["nodes"])
        leader["node"] = ",".join(leader["nodes"])
        leader["gpus"] = int(leader["gpus"] or 0) + int(record["gpus"] or 0)
        leader["cpus"] = int(leader["cpus"] or 0) + int(record["cpus"] or 0)
        leader["ntasks"] = int(leader["ntasks"] or 1) + 1
        leader["gpu_ids_by_node"] = {**leader["gpu_ids_by_node"], **record["gpu_ids_by_node"]}
    return [r for r in records if all(r is not m for m in members)]


def add_elastic(record: dict[str, Any], job_dir: Path) -> None:
    """The keeper's record of an elastic job's replicas and resizes, when it has one."""
    kept = read_json_safely(job_dir / "elastic.json")  # its user's: no FIFO, link, giant
    if not isinstance(kept, dict):
        return
    for key in _ELASTIC_KEYS:
        record[key] = kept.get(key)
    record["rank_nodes"] = kept.get("nodes")


__all__ = ["add_elastic", "fold_members", "member_of"]
