"""How long the simulator takes to replay a production trace, policy by policy.

    python bench/sim_speed.py [--policies fifo,...] [--trace CSV]

The contended Alibaba scenario of docs/scheduling.md: 8,152 tasks on 16 nodes x 8
GPUs (96 CPUs, 768 GiB each), arrivals compressed 100-fold, at most one pass a minute.
Each policy runs once in this process; the wall time and the number of passes are
reported, and the results are checked against the ones docs/scheduling.md records
(the same average JCT and preemptions: faster, not different). Target: each policy
under 10 s. Results go to bench/results/. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.sim.engine import POLICIES, SimOptions, simulate, uniform_nodes
from podium.sim.metrics import summarize
from podium.sim.traces import read_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "alibaba_openb_pod_list_default.csv"
# docs/scheduling.md, "Contended": avg JCT (s) and preemptions per policy (2026-11-26:
# the job-size weight 0 by default, shortest-first added).
RECORDED = {
    "fifo": (395064.5, 0),
    "fifo-backfill": (158631.1, 0),
    "priority": (293921.9, 0),
    "backfill": (150842.1, 0),
    "preempt": (156783.8, 337),
    "fairshare": (148932.2, 341),
    "shortest-first": (85631.5, 0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--trace", type=Path, default=TRACE)
    args = parser.parse_args()
    jobs = [replace(j, submit_time=j.submit_time * 0.01) for j in read_trace(args.trace, None)]
    nodes = uniform_nodes(16, 8, 96, 786432)
    options = SimOptions(pass_interval_s=60)
    out = {}
    for name in args.policies.split(","):
        t0 = time.perf_counter()
        result = simulate(jobs, nodes, name, options)
        seconds = time.perf_counter() - t0
        summary = summarize(result)
        expected = RECORDED.get(name)
        same = expected is None or (
            abs(summary["avg_jct_s"] - expected[0]) < 0.05 and summary["preemptions"] == expected[1]
        )
        out[name] = {
            "seconds": round(seconds, 2),
            "passes": result.passes,
            "avg_jct_s": summary["avg_jct_s"],
            "preemptions": summary["preemptions"],
            "same_as_recorded": same,
        }
        print(name, json.dumps(out[name]), flush=True)
    path = ROOT / "bench" / "results" / f"sim-speed-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {path}")
    if not all(r["same_as_recorded"] for r in out.values()):
        raise SystemExit("results differ from docs/scheduling.md")


if __name__ == "__main__":
    main()
