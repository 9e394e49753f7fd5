"""Scheduler pass time: 10,000 pending jobs on 1,000 nodes of 8 GPUs, backfill included.

    python bench/sched_pass.py [--pending 10000] [--nodes 1000] [--repeat 5]
                               [--placement best-fit,end-aware]

Three situations, each timed over --repeat passes (median reported):
  empty    the cluster is idle: the pass places as many pending jobs as fit;
  full     every GPU is busy with jobs that end at different times: nothing fits,
           the top job gets a reservation and every other job is tried for backfill;
  half     half the nodes are busy: placement, reservation and backfill together.
Each placement (`Policy.placement`) is timed on the same snapshot, the runs
interleaved. Slurm's default backfill considers 500 jobs per 30 s cycle; a full Podium pass looks
at every pending job. Pure CPU work in one process: `schedule()` exactly as the
daemon and the simulator call it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Policy


def build(pending_n: int, nodes_n: int, busy_fraction: float, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    nodes = tuple(
        NodeView(f"n{i:04d}", 128, 1_000_000, tuple(GpuSlot(g, "h100") for g in range(8)))
        for i in range(nodes_n)
    )
    running = []
    for i in range(int(nodes_n * busy_fraction)):
        running.append(
            Allocation(
                job_id=1_000_000 + i,
                node=nodes[i].name,
                user=f"u{i % 50}",
                gpu_indices=tuple(range(8)),
                cpus=64,
                mem_mb=100_000,
                qos="normal",
                account=f"a{i % 10}",
                start_time=0.0,
                time_limit_s=rng.uniform(600, 86400),
            )
        )
    pending = tuple(
        PendingJob(
            job_id=i,
            user=f"u{i % 50}",
            name=f"j{i}",
            partition="main",
            qos_priority=rng.choice([10, 100, 1000]),
            submit_time=rng.uniform(0, 3600),
            cpus=rng.choice([4, 8, 16]),
            mem_mb=rng.choice([16000, 64000]),
            gpus=rng.choice([1, 1, 2, 4, 8]),
            qos="normal",
            account=f"a{i % 10}",
            time_limit_s=rng.uniform(300, 86400),
        )
        for i in range(pending_n)
    )
    return Snapshot(nodes=nodes, running=tuple(running), pending=pending)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--placement", default="best-fit", help="comma-separated placements")
    args = parser.parse_args()
    placements = args.placement.split(",")
    policies = {p: Policy(backfill=True, preemption=False, placement=p) for p in placements}
    print(f"{args.pending} pending jobs, {args.nodes} nodes x 8 GPUs, backfill on")
    print(
        "situation | placement | busy nodes | started | reservations | "
        "median pass (s) | min (s) | max (s)"
    )
    for label, busy in (("empty", 0.0), ("half", 0.5), ("full", 1.0)):
        snap = build(args.pending, args.nodes, busy)
        times: dict[str, list[float]] = {p: [] for p in placements}
        decided = {}
        for _ in range(args.repeat):
            for placement, policy in policies.items():
                t0 = time.perf_counter()
                decided[placement] = schedule(snap, now=3600.0, policy=policy)
                times[placement].append(time.perf_counter() - t0)
        for placement, d in decided.items():
            t = times[placement]
            print(
                f"{label} | {placement} | {int(args.nodes * busy)} | {len(d.starts)} | "
                f"{len(d.reservations)} | {statistics.median(t):.3f} | {min(t):.3f} | "
                f"{max(t):.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
