"""`podium queue --start`: each pending job's expected start, as `squeue --start`
lists them (JOBID PARTITION NAME USER ST START_TIME NODES SCHEDNODES REASON), from the
daemon's forecast: planned by its passes, or "~" and an estimate beyond them (the work
ahead over the capacity); N/A where it cannot tell (`--json` says why)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from podium.api.selection import JobFilter
from podium.backends import open_backend
from podium.cli import render


def _when(epoch: float | None, kind: str | None = None) -> str:
    """A start as squeue prints it; an estimate beyond the forecast's passes with "~"."""
    if epoch is None:
        return "N/A"
    shown = dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%dT%H:%M:%S")
    return f"~{shown}" if kind == "estimate" else shown


def forecast_rows(user: str | None) -> list[dict[str, Any]]:
    """The pending jobs (of `user`, or everyone's), oldest first, each with its
    forecast's `expected_start`, `expected_start_epoch`, `sched_node` and
    `sched_gpu_ids`."""
    backend = open_backend()
    expected = {f["job_id"]: f for f in backend.forecast()}
    jobs = backend.jobs(JobFilter(states=("PENDING",), user=user))
    rows = []
    for job in jobs:
        found = expected.get(job["job_id"], {})
        rows.append(
            dict(
                job,
                expected_start=found.get("expected_start"),
                expected_start_epoch=found.get("expected_start_epoch"),
                start_kind=found.get("start_kind"),
                no_start_reason=found.get("no_start_reason"),
                sched_node=found.get("node"),
                sched_gpu_ids=found.get("gpu_ids") or [],
            )
        )
    return rows


def show_forecast(user: str | None, as_json: bool) -> None:
    rows = forecast_rows(user)
    if as_json:
        render.print_json(rows)
        return
    render.table(
        None,
        ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES", "SCHEDNODES",
         "GPUS", "NODELIST(REASON)"],
        [
            [r["display_id"], r["partition"], r["name"], r["user"], "PD",
             _when(r["expected_start_epoch"], r["start_kind"]), r["node_count"],
             r["sched_node"] or "(null)",
             ",".join(map(str, r["sched_gpu_ids"])) or "-", f"({r['reason']})"]
            for r in rows
        ],
    )  # fmt: skip


__all__ = ["forecast_rows", "show_forecast"]
