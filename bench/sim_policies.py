"""The tables of docs/scheduling.md ("Why it is the default"): every policy of
`podium sim` on the shared traces at 1x and 2x load, with the simulator's defaults
(half the jobs checkpoint, a 5 s save, a 10 s restart), by the CLI a user runs.

    python bench/sim_policies.py [--traces DIR] [--held-out DIR] [--checkpointing 0,0.5,1]

`--held-out DIR` adds every `openb_pod_list_*.csv` there (Alibaba's other traces of
the same family, which Podium was never tuned to) under las and fifo-backfill only.
`--checkpointing` repeats the Alibaba rows at other shares of checkpointing jobs.
Prints Markdown; the raw rows go to bench/results/sim-policies-STAMP.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIRESIAS = ["--nodes", "4", "--gpus-per-node", "4", "--cpus-per-node", "40",
            "--mem-per-node", "256000"]  # fmt: skip
ALIBABA = ["--nodes", "16", "--gpus-per-node", "8", "--cpus-per-node", "96",
           "--mem-per-node", "786432", "--pass-interval", "60"]  # fmt: skip
LOADS = {"1x": 1.0, "2x": 0.5}  # submit times multiplied by this


def sim(trace: Path, cluster: list[str], scale: float, *more: str) -> list[dict[str, Any]]:
    """`podium sim --json` of `trace`, its rows."""
    out = subprocess.run(
        [sys.executable, "-m", "podium", "sim", str(trace), *cluster, "--time-scale",
         str(scale), "--json", *more],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def line(label: str, row: dict[str, Any], base: dict[str, Any]) -> str:
    """One Markdown row: the policy's outcome against fifo-backfill's (`base`)."""
    name = f"**{row['policy']}**" if row.get("daemon_default") else row["policy"]
    return (
        f"| {label} | {name} | {row['checkpointing']} | {row['avg_jct_s']:,.1f} | "
        f"{row['avg_jct_s'] / base['avg_jct_s']:.3f} | {row['p999_wait_s']:,.0f} | "
        f"{row['max_wait_s']:,.0f} | {row['unfinished']} | {row['preemptions']:,} | "
        f"{row['slowed_2x_vs_fifo_bf'] * 100:.2f} % | {row['slowed_4x_vs_fifo_bf'] * 100:.2f} % | "
        f"{row['slowed_10x_vs_fifo_bf']} | {row['worst_vs_fifo_bf']}x |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=Path, default=ROOT.parent / "shared" / "traces")
    parser.add_argument("--held-out", type=Path, default=None)
    parser.add_argument("--checkpointing", default="")
    args = parser.parse_args()
    runs: list[tuple[str, Path, list[str], float, list[str], list[str]]] = []
    for load, scale in LOADS.items():
        runs.append((f"Tiresias 60, 4x4, {load}", args.traces / "tiresias_60_job.csv",
                     TIRESIAS, scale, [], []))  # fmt: skip
    for load, scale in LOADS.items():
        runs.append((f"Alibaba, 16x8, {load}", args.traces / "alibaba_openb_pod_list_default.csv",
                     ALIBABA, 0.01 * scale, [], []))  # fmt: skip
    for share in [s for s in args.checkpointing.split(",") if s]:
        runs.append(("Alibaba, 16x8, 1x", args.traces / "alibaba_openb_pod_list_default.csv",
                     ALIBABA, 0.01, ["--checkpointing", share],
                     ["--policies", "fifo-backfill,las"]))  # fmt: skip
    for trace in sorted(args.held_out.glob("openb_pod_list_*.csv")) if args.held_out else []:
        for load, scale in LOADS.items():
            name = trace.stem.removeprefix("openb_pod_list_")
            runs.append((f"held out: {name}, 16x8, {load}", trace, ALIBABA, 0.01 * scale, [],
                         ["--policies", "fifo-backfill,las"]))  # fmt: skip
    print(
        "| trace, cluster, load | policy | checkpointing | avg JCT | vs fifo-bf | p99.9 wait "
        "| longest wait | unfinished | preemptions | slowed > 2x | > 4x | > 10x | worst |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    kept = []
    for label, trace, cluster, scale, more, policies in runs:
        rows = sim(trace, cluster, scale, *more, *policies)
        base = next(r for r in rows if r["policy"] == "fifo-backfill")
        for row in rows:
            print(line(label, row, base), flush=True)
        kept.append({"label": label, "trace": trace.name, "scale": scale, "rows": rows})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "bench" / "results" / f"sim-policies-{stamp}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(kept, indent=1))
    print(f"\nraw rows: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
