"""How long a forecast takes: 10,000 pending jobs on 64 GPUs (8 nodes of 8), every GPU
busy with jobs ending at different times (`podium queue --start` on a full cluster).

    python bench/forecast_speed.py [--pending 10000] [--nodes 8] [--repeat 3] [--passes 100]

Pure CPU work in one process: `podium.sim.forecast.forecast` exactly as the daemon
calls it, within the daemon's budget of real time (`--budget`, default the daemon's).
Reports min / median / max seconds and how many jobs got a start: planned by the
passes, estimated beyond them (`podium.sim.forecast_bound`), or none (and why).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot
from podium.sched.model import LasRules, Policy
from podium.server.forecast_view import BUDGET_S
from podium.sim.forecast import forecast


def build(pending_n: int, nodes_n: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    nodes = tuple(
        NodeView(f"n{i:02d}", 128, 1_000_000, tuple(GpuSlot(g, "h100") for g in range(8)))
        for i in range(nodes_n)
    )
    running = tuple(
        Allocation(job_id=1_000_000 + i * 8 + g, node=n.name, user=f"u{i % 5}",
                   gpu_indices=(g,), cpus=8, mem_mb=50_000, qos="normal",
                   start_time=0.0, time_limit_s=rng.uniform(600, 86400))
        for i, n in enumerate(nodes) for g in range(8)
    )  # fmt: skip
    pending = tuple(
        PendingJob(job_id=i, user=f"u{i % 50}", name=f"j{i}", partition="main",
                   qos_priority=rng.choice([10, 100, 1000]), submit_time=rng.uniform(0, 3600),
                   cpus=8, mem_mb=50_000, gpus=rng.choice([1, 1, 2, 4, 8]), qos="normal",
                   time_limit_s=rng.uniform(600, 86400))
        for i in range(pending_n)
    )  # fmt: skip
    return Snapshot(nodes=nodes, running=running, pending=pending)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--passes", type=int, default=100)
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of work")
    parser.add_argument("--policy", choices=["multifactor", "las"], default="las")
    args = parser.parse_args()
    snap = build(args.pending, args.nodes)
    policy = Policy(las=LasRules()) if args.policy == "las" else Policy()
    times, passes = [], 0
    planned = estimated = 0
    reasons: Counter[str] = Counter()
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        deadline = t0 + args.budget
        got = forecast(snap, 3600.0, policy, max_passes=args.passes,
                       out_of_time=lambda d=deadline: time.perf_counter() >= d)  # fmt: skip
        times.append(time.perf_counter() - t0)
        planned, passes = len(got.starts), got.passes
        estimated, reasons = len(got.beyond.estimates), Counter(got.beyond.unknown.values())
    covered = (planned + estimated) / args.pending
    print(f"{args.pending} pending on {args.nodes * 8} GPUs ({args.policy}), max {args.passes} "
          f"passes, budget {args.budget} s: {min(times):.2f} / {statistics.median(times):.2f} / "
          f"{max(times):.2f} s; {passes} passes; {planned} planned, {estimated} estimated "
          f"({covered:.1%} covered), none: {dict(reasons) or 0}")  # fmt: skip


if __name__ == "__main__":
    main()
