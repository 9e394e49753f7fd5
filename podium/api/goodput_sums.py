"""Goodput: of the GPU-seconds jobs were charged, the share that was not lost to a
preemption, a resize or a fault (work done since a run's newest checkpoint and then
thrown away). Pure and stdlib-only: `podium acct --goodput` sums the accounting
records it is given; a metrics endpoint can sum the same records."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

LOSS_CAUSES = ("preemption", "resize", "fault")
GROUPINGS = ("account", "user")


def goodput_rows(jobs: Iterable[Mapping[str, Any]], by: str = "account") -> list[dict[str, Any]]:
    """One row per `by` value (an accounting record's "account" or "user"), sorted by
    name, then a row named "TOTAL": jobs, charged GPU-seconds, lost GPU-seconds in all
    and by cause (LOSS_CAUSES, each present), useful GPU-seconds, and `goodput`
    (useful / charged; None when nothing was charged). Charged is a record's
    `gpu_seconds_all_runs` (every run of a requeued or resized job), else its
    `gpu_seconds`. A record without `lost_gpu_seconds` (a backend that does not count
    lost work) lost nothing known.
    Raises ValueError for a `by` outside GROUPINGS."""
    if by not in GROUPINGS:
        raise ValueError(f"goodput by {by!r}: expected one of {', '.join(GROUPINGS)}")
    groups: dict[str, dict[str, Any]] = {}
    total = _empty("TOTAL")
    for job in jobs:
        key = str(job.get(by) or "")
        row = groups.setdefault(key, _empty(key))
        for into in (row, total):
            _add(into, job)
    rows = [groups[k] for k in sorted(groups)]
    rows.append(total)
    for row in rows:
        lost = sum(row["lost_by_cause"].values())
        row["lost_gpu_seconds"] = round(lost, 3)
        row["useful_gpu_seconds"] = round(max(0.0, row["gpu_seconds"] - lost), 3)
        row["gpu_seconds"] = round(row["gpu_seconds"], 3)
        charged = row["gpu_seconds"]
        row["goodput"] = round(row["useful_gpu_seconds"] / charged, 4) if charged > 0 else None
    return rows


def _empty(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "jobs": 0,
        "gpu_seconds": 0.0,
        "lost_by_cause": dict.fromkeys(LOSS_CAUSES, 0.0),
    }


def _add(row: dict[str, Any], job: Mapping[str, Any]) -> None:
    row["jobs"] += 1
    charged = job.get("gpu_seconds_all_runs", job.get("gpu_seconds"))
    row["gpu_seconds"] += float(charged or 0.0)
    lost = job.get("lost_gpu_seconds") or {}
    for cause, seconds in lost.items():
        by_cause = row["lost_by_cause"]
        by_cause[cause] = round(by_cause.get(cause, 0.0) + float(seconds), 3)


__all__ = ["GROUPINGS", "LOSS_CAUSES", "goodput_rows"]
