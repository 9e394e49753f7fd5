"""Human output: aligned Rich tables. Machine output is `--json` (see records).

Every value shown here passes through `printable`: user text (job names, comments,
reasons, paths) can hold escape sequences, and a table must never let them reach the
terminal. Cells are plain `Text`, so Rich markup in a name is shown, not obeyed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

import click

from podium.api.text import printable
from podium.spec.timefmt import format_duration


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print an aligned table (Rich) to stdout."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console(width=None if sys.stdout.isatty() else 200)
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for col in columns:
        t.add_column(col, no_wrap=True)
    for row in rows:
        t.add_row(*(Text("" if v is None else printable(str(v))) for v in row))
    console.print(t)


def _short_time(iso: str | None) -> str:
    return iso[:19].replace("T", " ") if iso else ""


def queue_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for j in jobs:
        where = f"({j['reason']})" if j["state"] == "PENDING" else (j["node"] or "")
        rows.append(
            [
                j["display_id"],
                j["name"],
                j["user"],
                j["account"],
                j["qos"],
                j["state"],
                format_duration(j["elapsed_s"]),
                j["gpus"],
                where,
            ]
        )
    return rows


QUEUE_COLUMNS = ["JOBID", "NAME", "USER", "ACCOUNT", "QOS", "STATE", "TIME", "GPUS", "NODE(REASON)"]


def show_queue(jobs: list[dict[str, Any]], title: str | None = None) -> None:
    table(title, QUEUE_COLUMNS, queue_rows(jobs))


def exit_text(job: dict[str, Any]) -> str:
    code, sig = job["exit_code"], job["signal"]
    if code is None and sig is None:
        return ""
    return f"{code if code is not None else 0}:{sig or 0}"


def show_acct(jobs: list[dict[str, Any]], title: str | None = None) -> None:
    rows = [
        [
            j["display_id"],
            j["name"],
            j["user"],
            j["account"],
            j["state"],
            _short_time(j["start_time"]),
            _short_time(j["end_time"]),
            format_duration(j["elapsed_s"]),
            j["gpus"],
            f"{j['gpu_seconds']:.1f}",
            exit_text(j),
        ]
        for j in jobs
    ]
    table(
        title,
        [
            "JOBID",
            "NAME",
            "USER",
            "ACCOUNT",
            "STATE",
            "START",
            "END",
            "ELAPSED",
            "GPUS",
            "GPU_SEC",
            "EXITCODE",
        ],
        rows,
    )


def show_nodes(nodes: list[dict[str, Any]]) -> None:
    """The node table, then each GPU's owner and health (HyperPod-style labels)."""
    rows = []
    for n in nodes:
        rows.append(
            [
                n["node"],
                n["state"],
                f"{n['cpus_alloc']}/{n['cpus_total']}",
                f"{n['mem_alloc_mb']}/{n['mem_total_mb']}",
                f"{n['gpus_used']}/{n['gpus_total']}",
                n["gpu_type"] or "",
                n.get("health", {}).get("label", ""),
                n["reason"] or "",
            ]
        )
    table(None, ["NODE", "STATE", "CPUS", "MEM_MB", "GPUS", "TYPE", "HEALTH", "REASON"], rows)
    gpu_rows = []
    for n in nodes:
        for g in n["gpus"]:
            h = g.get("health", {})
            gpu_rows.append(
                [
                    n["node"],
                    g["index"],
                    "-" if g["job_id"] is None else g["job_id"],
                    h.get("label", ""),
                    h.get("fault") or "",
                    h.get("last_deep_check") or "",
                    h.get("reason") or "",
                ]
            )
    if gpu_rows:
        table(None, ["NODE", "GPU", "JOB", "HEALTH", "FAULT", "DEEP CHECK", "REASON"], gpu_rows)


def show_record(record: dict[str, Any], skip: Callable[[str], bool] = lambda k: False) -> None:
    """Key = value lines, like scontrol show job."""
    width = max(len(k) for k in record)
    for key, value in record.items():
        if skip(key):
            continue
        click.echo(f"{key.ljust(width)} = {printable(str(value))}")
