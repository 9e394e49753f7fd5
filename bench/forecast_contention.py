"""What a forecast costs, and what one user looping on `podium show` of a pending job
costs everyone else (issue 43, item 3), this checkout beside another (`--baseline`).

    python bench/forecast_contention.py [--pending 10000] [--runs 3] [--reads 40]
        [--baseline DIR]

Two parts:

1. **The forecast alone**: `podium.sim.forecast.forecast` as the daemon calls it
   (MAX_PASSES passes, BUDGET_S of work) on PENDING jobs of distinct shapes (GPUs,
   CPUs, memory and time limits all drawn at random) behind 64 busy GPUs: seconds,
   passes, jobs given a start.
2. **A reader beside a looper**, on a real daemon (64 declared GPUs, all held by one
   job with a time limit, PENDING distinct jobs queued behind): a reader lists every
   job (`GET /v1/jobs`, as another user's `podium queue`) `--reads` times, first on
   an idle daemon, then while a second client loops on `GET /v1/jobs/ID` of a pending
   job (`podium show`). Reported: the reader's p50 / p99 / max in both, their ratio,
   and how many shows the looper got through. With `--baseline DIR` (a checkout of an
   earlier commit: `git worktree add DIR 873ad86`), the same is run on a daemon
   importing that code, interleaved run by run.

Results: stdout and bench/results/forecast-contention-STAMP.json."""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from embedded import EmbeddedCluster, compile_podium
from tables import spread

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot
from podium.sched.model import Policy
from podium.server.forecast_view import BUDGET_S, MAX_PASSES
from podium.sim.forecast import forecast

CONFIG = """\
node: {name: node0, cpus: 256, memory_mb: 4000000,
       gpus: {source: declared, count: 64, type: h100, memory_mb: 81920}}
scheduler_interval_s: 0.5
"""


def distinct_snapshot(pending_n: int, seed: int = 1) -> Snapshot:
    """PENDING jobs of distinct shapes behind 64 busy GPUs (8 nodes of 8)."""
    rng = random.Random(seed)
    nodes = tuple(
        NodeView(f"n{i}", 128, 1_000_000, tuple(GpuSlot(g, "h100") for g in range(8)))
        for i in range(8)
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
                   cpus=rng.randint(1, 64), mem_mb=rng.randint(1_000, 500_000),
                   gpus=rng.randint(1, 8), qos="normal", time_limit_s=rng.uniform(60, 86400))
        for i in range(pending_n)
    )  # fmt: skip
    return Snapshot(nodes=nodes, running=running, pending=pending)


def forecast_alone(pending_n: int, runs: int) -> dict[str, Any]:
    snap = distinct_snapshot(pending_n)
    times, passes, started = [], 0, 0
    for _ in range(runs):
        t0 = time.perf_counter()
        got = forecast(
            snap, 3600.0, Policy(), MAX_PASSES,
            lambda end=t0 + BUDGET_S: time.perf_counter() >= end,
        )  # fmt: skip
        times.append(time.perf_counter() - t0)
        passes, started = got.passes, len(got.starts)
    return {"seconds": times, "passes": passes, "started": started}


def _fill(cluster: EmbeddedCluster, pending_n: int) -> int:
    """One job holding all 64 GPUs, then `pending_n` distinct jobs; the id of one."""
    rng = random.Random(2)
    with cluster.client() as http:
        held = http.post("/v1/jobs", json={"wrap": "sleep 3000", "cwd": str(cluster.work),
                                           "options": ["-G", "64", "-t", "60"]})  # fmt: skip
        assert held.status_code == 200, held.text
        jobs = [
            {"wrap": "true", "cwd": str(cluster.work), "options": [
                "-G", str(rng.randint(1, 8)), "-c", str(rng.randint(1, 32)),
                f"--mem={rng.randint(100, 60_000)}M", "-t", str(rng.randint(1, 3000))]}
            for _ in range(pending_n)
        ]  # fmt: skip
        ids: list[int] = []
        for i in range(0, pending_n, 500):
            made = http.post("/v1/jobs/batch", json={"jobs": jobs[i : i + 500]})
            assert made.status_code == 200, made.text
            ids += [group[0] for group in made.json()["job_ids"]]
    return ids[len(ids) // 2]


def _reads(cluster: EmbeddedCluster, n: int, limit_s: float) -> list[float]:
    """`n` timed `GET /v1/jobs` (stopping after `limit_s`)."""
    took: list[float] = []
    began = time.monotonic()
    with cluster.client() as http:
        for _ in range(n):
            t0 = time.perf_counter()
            assert http.get("/v1/jobs").status_code == 200
            took.append(time.perf_counter() - t0)
            if time.monotonic() - began > limit_s:
                break
    return took


def _percentiles(took: list[float]) -> dict[str, float]:
    ordered = sorted(took)
    return {
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max": ordered[-1],
        "n": len(ordered),
    }


def daemon_run(pending_n: int, reads: int, code: Path | None) -> dict[str, Any]:
    """One daemon (importing `code`, None: this checkout): idle reads, then reads
    beside a looping show."""
    cluster = EmbeddedCluster(CONFIG, prefix="podium-bench-forecast-")
    if code is not None:
        cluster.env["PYTHONPATH"] = str(code)
    with cluster:
        pending = _fill(cluster, pending_n)
        time.sleep(3)  # the passes that read the queue
        with cluster.client() as http:
            t0 = time.perf_counter()
            assert http.get(f"/v1/jobs/{pending}").status_code == 200
            first_show = time.perf_counter() - t0
        idle = _reads(cluster, reads, limit_s=300)
        stop, shows = threading.Event(), [0]

        def loop() -> None:
            with cluster.client(timeout=600) as http:
                while not stop.is_set():
                    http.get(f"/v1/jobs/{pending}")
                    shows[0] += 1

        looper = threading.Thread(target=loop)
        looper.start()
        try:
            time.sleep(0.5)
            busy = _reads(cluster, reads, limit_s=300)
        finally:
            stop.set()
            looper.join()
        spent = sum(busy)
    return {
        "first_show_s": first_show,
        "idle": _percentiles(idle),
        "beside_looper": _percentiles(busy),
        "shows_per_s": shows[0] / spent if spent else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout to compare")
    args = parser.parse_args()
    compile_podium()
    alone = forecast_alone(args.pending, args.runs)
    print(f"forecast alone, {args.pending} distinct pending on 64 GPUs (budget {BUDGET_S:g} s, "
          f"{MAX_PASSES} passes): {spread(alone['seconds'], 2)} s; {alone['passes']} passes, "
          f"{alone['started']} jobs given a start")  # fmt: skip
    sides = {"this": None} | ({"baseline": args.baseline} if args.baseline else {})
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for i in range(args.runs):
        for name, code in sides.items():  # interleaved, run by run
            got = daemon_run(args.pending, args.reads, code)
            runs[name].append(got)
            print(f"run {i + 1} {name}: first show {got['first_show_s']:.2f} s; reader p50/p99 "
                  f"idle {got['idle']['p50']:.3f}/{got['idle']['p99']:.3f} s, beside the looper "
                  f"{got['beside_looper']['p50']:.3f}/{got['beside_looper']['p99']:.3f} s "
                  f"(max {got['beside_looper']['max']:.2f}); {got['shows_per_s']:.1f} shows/s",
                  flush=True)  # fmt: skip
    for name, results in runs.items():
        ratio = [r["beside_looper"]["p99"] / r["idle"]["p99"] for r in results]
        print(f"{name}: reader p99 beside the looper / idle: {spread(ratio, 2)}; "
              f"first show {spread([r['first_show_s'] for r in results], 2)} s")  # fmt: skip
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    path = out / f"forecast-contention-{time.strftime('%Y%m%d-%H%M%S')}.json"
    record = {"pending": args.pending, "alone": alone, "runs": runs,
              "baseline": str(args.baseline) if args.baseline else None,
              "machine": os.uname().nodename}  # fmt: skip
    path.write_text(json.dumps(record, indent=2))
    print(f"results: {path}")


if __name__ == "__main__":
    main()
