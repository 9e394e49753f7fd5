"""Markdown tables for docs/benchmarks.md from the results of the interleaved benchmarks.

    python bench/tables.py bench/results/launch-throughput-STAMP.json [...]
    python bench/tables.py bench/results/scale-STAMP.json

Each cell is min / median / max over the runs; each ratio is Podium's median over the
peer's, followed by the range of the per-run ratios (each run measured every side back
to back). Results written by bench/launch_throughput.py and bench/scale.py (the
`runs` format, 2026-11-26 on).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

LAUNCH_ROWS = (
    ("jobs_per_s", "jobs/s end to end", 1),
    ("submits_per_s", "submits/s", 1),
    ("submit_start_p50_s", "submit->start p50 (s)", 3),
    ("submit_start_p99_s", "submit->start p99 (s)", 3),
    ("controller_cpu_ms_per_job", "CPU per job, controller (ms)", 1),
    ("cluster_cpu_ms_per_job", "CPU per job, whole cluster (ms)", 1),
    ("machine_cpu_ms_per_job", "CPU per job, whole machine (ms)", 1),
)
SCALE_ROWS = (
    ("fill_per_s", "filling the queue: submits/s by the REST API, 2 threads", 1),
    ("submit_cli_p50_ms", "one more submit by the CLI, p50 (ms)", 1),
    ("submit_api_p50_ms", "one more submit by the REST API, p50 (ms)", 1),
    ("ping_p99_ms", "API ping p99 while submits prompt passes (ms)", 1),
    ("queue_json_s", "`queue --json` / `squeue -r --json` (s)", 3),
    ("table_s", "the table, 10,000 jobs (s)", 3),
    ("list_api_s", "every job by the REST API (s)", 3),
    ("table_1k_s", "the table, 1,000 jobs (s)", 3),
    ("idle_controller_pct", "idle CPU, controller (% of a core)", 2),
    ("idle_cluster_pct", "idle CPU, whole cluster (% of a core)", 2),
    ("rss_mb", "controller RSS (MB)", 0),
)


def number(value: Any) -> float | None:
    """A result's figure, None when it was not measured (absent or NaN)."""
    return None if value is None or value != value else float(value)


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def header(cells: list[str]) -> list[str]:
    return [row(cells), "|" + "---|" * len(cells)]


def spread(values: list[float], digits: int) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{low:,.{digits}f} / {mid:,.{digits}f} / {high:,.{digits}f}"


def ratio(mine: list[float], theirs: list[float]) -> str:
    """Podium's median over the peer's, and the range of the per-run ratios."""
    if not mine or len(mine) != len(theirs) or not all(theirs):
        return ""
    per_run = [a / b for a, b in zip(mine, theirs, strict=True)]
    median = statistics.median(mine) / statistics.median(theirs)
    return f"**{median:.2g}** ({min(per_run):.2g}-{max(per_run):.2g})"


def table(
    runs: dict[str, list[dict[str, Any]]],
    rows: tuple[tuple[str, str, int], ...],
    pick: Any,
) -> list[str]:
    """One markdown table: a row per figure, a column per side, a ratio per peer."""
    sides = list(runs)
    peers = [s for s in sides if s != "podium"]
    lines = header(["figure", *sides, *(f"podium / {p}" for p in peers)])
    for key, label, digits in rows:
        values = {s: [v for r in runs[s] if (v := pick(s, r, key)) is not None] for s in sides}
        if not any(values.values()):
            continue
        cells = [spread(values[s], digits) if values[s] else "" for s in sides]
        ratios = [ratio(values.get("podium", []), values[p]) for p in peers]
        lines.append(row([label, *cells, *ratios]))
    return lines


def launch_tables(record: dict[str, Any]) -> list[str]:
    runs: dict[str, list[dict[str, Any]]] = record["runs"]
    modes = list(dict.fromkeys(m for side_runs in runs.values() for m in side_runs[0]))
    out = []
    paced = [m for m in modes if m.startswith("paced@")]
    if paced:
        out += paced_table(runs, paced)
    for mode in (m for m in modes if m not in paced):

        def pick(side: str, run: dict[str, Any], key: str, mode: str = mode) -> float | None:
            got = run.get("array" if mode == "batch" and side != "podium" else mode, {})
            return number(got.get(key))

        title = f"{mode} (Slurm: arrays)" if mode == "batch" else mode
        out += [f"**{title}**", "", *table(runs, LAUNCH_ROWS, pick), ""]
    return out


def paced_table(runs: dict[str, list[dict[str, Any]]], modes: list[str]) -> list[str]:
    """Submit->start at each paced arrival rate: per side, p50 and p99 (medians over
    the runs, with their min-max), and the rate the clients kept."""
    sides = list(runs)
    lines = header(["offered jobs/s", *(f"{s}: p50 / p99 (s)" for s in sides)])
    for mode in modes:
        cells = [mode.split("@", 1)[1]]
        for side in sides:
            got = [r[mode] for r in runs[side] if mode in r]
            if not got:
                cells.append("")
                continue
            p50 = [g["submit_start_p50_s"] for g in got]
            p99 = [g["submit_start_p99_s"] for g in got]
            kept = statistics.median(g["submits_per_s"] for g in got)
            cells.append(
                f"{statistics.median(p50):.3f} ({min(p50):.3f}-{max(p50):.3f}) / "
                f"{statistics.median(p99):.3f} ({min(p99):.3f}-{max(p99):.3f}); "
                f"kept {kept:.1f}/s"
            )
        lines.append(row(cells))
    return [*lines, ""]


def scale_tables(record: dict[str, Any]) -> list[str]:
    def pick(side: str, run: dict[str, Any], key: str) -> float | None:
        return number(run.get(key))

    return [*table(record["runs"], SCALE_ROWS, pick), ""]


def main() -> None:
    for name in sys.argv[1:]:
        record = json.loads(Path(name).read_text())
        kind = launch_tables if "launch-throughput" in Path(name).name else scale_tables
        print(f"<!-- {Path(name).name} -->")
        print("\n".join(kind(record)))


if __name__ == "__main__":
    main()
