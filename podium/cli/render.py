"""Human output: aligned plain-text tables. Machine output is `--json` (see records).

Every value shown here passes through `printable`: user text (job names, comments,
reasons, paths) can hold escape sequences, and a table must never let them reach the
terminal. Standard library only: `podium queue` prints its table on the lean path.
"""

from __future__ import annotations

import sys

from podium.api.backend_protocol import records_json
from podium.api.text import printable
from podium.api.times import format_duration

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any


def print_json(data: Any) -> None:
    """`data` as JSON: indented, except that a list of records puts one record on each
    line (`records_json`)."""
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        sys.stdout.write(records_json(data))
    else:
        import json  # not on the lean path's tables

        print(json.dumps(data, indent=2))


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print an aligned table to stdout: a header, a rule, one line per row.

    Plain string work (10,000 rows in a few tens of milliseconds; a Rich table takes
    seconds). Every cell passes through `printable`, so no user text reaches the
    terminal as a control sequence.
    """
    cells = [[("" if v is None else printable(str(v))) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        for i, cell in enumerate(row):
            if len(cell) > widths[i]:
                widths[i] = len(cell)
    gap = "   "

    def line(values: Sequence[str]) -> str:
        return gap.join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [title] if title else []
    out.append(line(list(columns)))
    out.append("\u2500" * (sum(widths) + len(gap) * (len(widths) - 1)))
    out.extend(line(row) for row in cells)
    sys.stdout.write("\n".join(out) + "\n")


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
# the record keys queue_rows reads (Backend.jobs_table fetches only these)
QUEUE_FIELDS = (
    "display_id", "name", "user", "account", "qos", "state", "elapsed_s", "gpus", "reason", "node",
)  # fmt: skip
# What `--array` (squeue -r) reads to list a pending array's tasks one each.
ARRAY_FIELDS = ("job_id", "array_job_id", "array_task_id", "array_task_string")


def show_queue(jobs: list[dict[str, Any]], title: str | None = None) -> None:
    table(title, QUEUE_COLUMNS, queue_rows(jobs))


def exit_text(job: dict[str, Any]) -> str:
    code, sig = job["exit_code"], job["signal"]
    if code is None and sig is None:
        return ""
    return f"{code if code is not None else 0}:{sig or 0}"


def gpu_text(job: dict[str, Any]) -> str:
    """A job's GPUs as acct lists them: "2", "h100:2", or a share of GPUs with what it
    weighs in GPUs: "mps:50 (0.5)", "1g.10gb:1 (0.14)"."""
    gpus, kind, share = job["gpus"], job.get("gpu_type"), job.get("gpu_share")
    text = f"{kind}:{gpus}" if kind and gpus else str(gpus)
    return f"{text} ({share:g})" if share is not None else text


def show_acct(jobs: list[dict[str, Any]], title: str | None = None) -> None:
    """One line per job, then one per step (ID.batch, ID.0, ...), as sacct shows them."""
    rows: list[list[Any]] = []
    for j in jobs:
        rows.append(
            [
                j["display_id"],
                j["name"],
                j["user"],
                j["account"],
                j["state"],
                _short_time(j["start_time"]),
                _short_time(j["end_time"]),
                format_duration(j["elapsed_s"]),
                gpu_text(j),
                f"{j['gpu_seconds']:.1f}",
                "" if j.get("gpu_mem_peak_mb") is None else j["gpu_mem_peak_mb"],
                exit_text(j),
            ]
        )
        for s in j.get("steps", []):
            rows.append(
                [
                    s["display_id"],
                    s["name"],
                    "",
                    j["account"],
                    s["state"],
                    _short_time(s["start_time"]),
                    _short_time(s["end_time"]),
                    format_duration(s["elapsed_s"]),
                    len(s["gpu_ids"]),
                    f"{s['gpu_seconds']:.1f}" if "gpu_seconds" in s else "",  # ID.spares
                    "",
                    exit_text(s),
                ]
            )
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
            "GPU_MEM_MB",
            "EXITCODE",
        ],
        rows,
    )


def show_goodput(rows: list[dict[str, Any]], by: str) -> None:
    """The goodput table: one row per account (or user), then TOTAL; lost GPU-seconds
    by cause, and goodput as a percentage ("-" where nothing was charged)."""
    causes = list(rows[-1]["lost_by_cause"]) if rows else []
    body = [
        [
            r["name"] or "-",
            r["jobs"],
            f"{r['gpu_seconds']:.1f}",
            *(f"{r['lost_by_cause'].get(c, 0.0):.1f}" for c in causes),
            f"{r['useful_gpu_seconds']:.1f}",
            "-" if r["goodput"] is None else f"{100 * r['goodput']:.1f}%",
        ]
        for r in rows
    ]
    lost = [f"LOST_{c.upper()}" for c in causes]
    table(None, [by.upper(), "JOBS", "GPU_SEC", *lost, "USEFUL", "GOODPUT"], body)


def show_nodes(nodes: list[dict[str, Any]]) -> None:
    """The node table, then each GPU's owner and health (HyperPod-style labels), then
    what each node enforces of a job's limits (memory, cpus, devices, processes)."""
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
            parent, share = g.get("parent"), g.get("share")
            kind = g.get("type") or ""
            if parent is not None:
                kind = f"{kind} of GPU {parent}"
            elif share:
                kind = f"{kind} {share['kind']} {share['used']}/{share['units']}"
            job = g["job_id"] if g["job_id"] is not None else None
            jobs = ",".join(str(j) for j in share["jobs"]) if share else None
            gpu_rows.append(
                [
                    n["node"],
                    g["index"],
                    kind,
                    jobs or ("-" if job is None else job),
                    h.get("label", ""),
                    h.get("fault") or "",
                    h.get("last_deep_check") or "",
                    h.get("reason") or "",
                ]
            )
    if gpu_rows:
        table(
            None,
            ["NODE", "GPU", "TYPE", "JOB", "HEALTH", "FAULT", "DEEP CHECK", "REASON"],
            gpu_rows,
        )
    limits = [
        [n["node"], resource, how]
        for n in nodes
        for resource, how in (n.get("enforcement") or {}).items()
    ]
    if limits:  # what the node's cgroups hold each job to, and what is only counted
        table(None, ["NODE", "LIMIT", "ENFORCEMENT"], limits)


def show_record(record: dict[str, Any], skip: Callable[[str], bool] = lambda k: False) -> None:
    """Key = value lines, like scontrol show job."""
    width = max(len(k) for k in record)
    for key, value in record.items():
        if skip(key):
            continue
        print(f"{key.ljust(width)} = {printable(str(value))}")
