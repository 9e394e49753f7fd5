"""How low can any queue order take a trace's average JCT? A search over orders.

    python bench/order_search.py [--iterations 3000] [--seeds 2] [--nodes 4 --gpus 4]
        [--placement best-fit,end-aware] [--time-scale 1.0]

Evidence for what no non-preemptive policy can beat, not a policy: every job gets a
rank, the scheduler runs through `podium.sim` (the real `schedule()`, backfill on,
no preemption) with the queue ordered by rank (multifactor with every weight 0 and
the rank as Slurm's `nice`), and a simulated annealing over the ranks keeps the
lowest average JCT found. It starts from submit order (fifo-backfill) and from the
smallest GPU-time first. A found order is a schedule some clairvoyant policy could
have produced; the search's best is an upper bound on the best order, not a proof.
Default: the Tiresias 60-job trace on 4 x 4 GPUs, as docs/scheduling.md measures it.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.sched.model import PendingJob, Policy
from podium.sched.priority import PriorityWeights
from podium.sim import engine, replay
from podium.sim.engine import SimOptions, simulate, uniform_nodes
from podium.sim.traces import TraceJob, read_trace

TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "tiresias_60_job.csv"
NO_WEIGHTS = PriorityWeights(age=0.0, fairshare=0.0, qos=0.0, jobsize=0.0, partition=0.0)


def average_jct(
    trace: list[TraceJob], nodes: int, gpus: int, placement: str, rank: dict[int, int]
) -> float:
    """The replay's average JCT with the queue in `rank` order (lowest first)."""
    pending_of = replay.Replay.pending_of

    def ranked(self: replay.Replay, j: TraceJob) -> PendingJob:
        return replace(pending_of(self, j), nice=rank[j.job_id])

    engine.POLICIES["ranked"] = Policy(backfill=True, preemption=False, weights=NO_WEIGHTS)
    replay.Replay.pending_of = ranked  # type: ignore[method-assign]
    try:
        result = simulate(
            trace, uniform_nodes(nodes, gpus, 10 * gpus, 64000 * gpus), "ranked",
            SimOptions(placement=placement),
        )  # fmt: skip
    finally:
        replay.Replay.pending_of = pending_of  # type: ignore[method-assign]
    ends = [o.end - o.job.submit_time for o in result.outcomes if o.end is not None]
    return sum(ends) / len(ends)


def search(
    trace: list[TraceJob], nodes: int, gpus: int, placement: str, start: dict[int, int],
    iterations: int, rng: random.Random,
) -> float:  # fmt: skip
    """Simulated annealing over the ranks from `start`: the lowest average JCT seen."""
    current = dict(start)
    now = best = average_jct(trace, nodes, gpus, placement, current)
    temperature = 3.0
    ids = list(current)
    for _ in range(iterations):
        trial = dict(current)
        moved = rng.choice(ids)
        trial[moved] = max(0, trial[moved] + int(rng.gauss(0, len(ids) * 40)))
        got = average_jct(trace, nodes, gpus, placement, trial)
        if got <= now or rng.random() < math.exp((now - got) / temperature):
            current, now = trial, got
            best = min(best, now)
        temperature *= 0.999
    return best


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=4)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--placement", default="best-fit,end-aware")
    args = parser.parse_args()
    trace = [
        replace(j, submit_time=j.submit_time * args.time_scale) for j in read_trace(args.trace)
    ]
    by_submit = sorted(trace, key=lambda j: (j.submit_time, j.job_id))
    fifo = {j.job_id: 100 * i for i, j in enumerate(by_submit)}
    area = sorted(trace, key=lambda j: (j.gpus * j.duration, j.submit_time))
    smallest = {j.job_id: 100 * i for i, j in enumerate(area)}
    print(f"{args.trace.name}: {len(trace)} jobs on {args.nodes} x {args.gpus} GPUs, "
          f"time scale {args.time_scale}, {args.iterations} iterations per search")  # fmt: skip
    print("placement | submit order | smallest GPU-time first | best found (per seed)")
    for placement in args.placement.split(","):
        starts = [average_jct(trace, args.nodes, args.gpus, placement, r) for r in (fifo, smallest)]
        shape = (args.nodes, args.gpus, placement)
        found = [
            search(trace, *shape, start, args.iterations, random.Random(seed))
            for seed in range(args.seeds)
            for start in (fifo, smallest)
        ]
        print(f"{placement} | {starts[0]:.1f} | {starts[1]:.1f} | {min(found):.1f} "
              f"({', '.join(f'{f:.1f}' for f in found)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
