"""How much of the cluster stays unallocatable when the first task cannot be placed?
(The measure of the "Beware of Fragmentation" paper, ATC '23, published with the
Alibaba trace.)

    python bench/fragmentation.py [--sharing whole,mps] [--placements best-fit,fgd]
        [--nodes 16] [--orders 5]

The Alibaba trace's tasks (8,152, most asking for part of one GPU) are placed one by
one, none ending, through `podium.sched.schedule` itself (the pass the daemon and the
simulator run), on the trace's own 1,213 GPU nodes (or `--nodes` nodes of 8 GPUs),
shared as `podium sim --sharing` shares them. Fragmentation-aware placement weighs
the trace's own mix of requests (`Snapshot.workload`), as the paper does.
It stops at the first task no node can hold, and reports the share of the GPUs left
unallocated then (MPS units by their share of a GPU) and the tasks placed. It does this
for each placement (`Policy.placement`), in the trace's order and in `--orders - 1`
shuffled orders (a seed each, the same for every placement): min / median / max.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.sched import Allocation, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Policy
from podium.sim.engine import SimOptions, uniform_nodes
from podium.sim.replay import Hooks, Replay
from podium.sim.traces import TraceJob, TraceNode, read_alibaba, read_alibaba_nodes

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACE = TRACES / "alibaba_openb_pod_list_default.csv"
NODES = TRACES / "alibaba_openb_node_list_gpu_node.csv"


def fill(
    jobs: list[TraceJob], cluster: list[TraceNode], sharing: str, placement: str
) -> tuple[float, int, str]:
    """(unallocated share of the GPUs, tasks placed, what failed and what was free) at
    the first task that fits nowhere."""
    replay = Replay(jobs, cluster, "fifo-backfill", SimOptions(sharing=sharing), Hooks())
    policy = Policy(use_priority=False, backfill=False, preemption=False, placement=placement)
    held: list[Allocation] = []
    kinds = Counter((p.gpu_type, p.gpus) for p in map(replay.pending_of, replay.runnable))
    workload = tuple((kind, count, float(n)) for (kind, count), n in kinds.items() if count)
    total = float(sum(n.gpus for n in cluster))
    used = 0.0
    for placed, job in enumerate(replay.runnable):
        pending = replay.pending_of(job)
        snap = Snapshot(
            nodes=replay.views, running=tuple(held), pending=(pending,), workload=workload
        )
        got = schedule(snap, 0.0, policy, explain=False)
        if not got.starts:
            return 1.0 - used / total, placed, _left(pending, held, replay.views)
        share = replay.shares[job.job_id]
        for node, gpus in got.starts[0].placements:
            alloc = pending.allocate(node, gpus, 0.0)
            held.append(replace(alloc, gpu_units=share) if pending.gpu_type else alloc)
        used += share
    return 1.0 - used / total, len(replay.runnable), "all placed"


def _left(job: PendingJob, held: list[Allocation], views: tuple[NodeView, ...]) -> str:
    """The task that failed, and the free whole GPUs and shared GPUs' free parts then."""
    taken = {(a.node, g) for a in held for g in a.gpu_indices}
    whole = sum(1 for v in views for g in v.gpus if g.whole and (v.name, g.index) not in taken)
    parts = sum(1 for v in views for g in v.gpus if not g.whole and (v.name, g.index) not in taken)
    asked = f"{job.gpus} {job.gpu_type or 'whole GPU'}(s)"
    return f"failed: {asked}; free: {whole} whole GPUs, {parts} parts of shared GPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sharing", default="whole,mps")
    parser.add_argument("--placements", default="best-fit,fgd")
    parser.add_argument(
        "--nodes", type=int, default=0, help="that many nodes of 8 GPUs (default: the "
        "trace's own node list, 1,213 GPU nodes of 1 to 8 GPUs)",
    )  # fmt: skip
    parser.add_argument("--orders", type=int, default=5)
    args = parser.parse_args()
    trace = read_alibaba(TRACE)
    cluster = uniform_nodes(args.nodes, 8, 96, 786432) if args.nodes else read_alibaba_nodes(NODES)
    orders = [trace]
    for seed in range(1, args.orders):
        shuffled = trace[:]
        random.Random(seed).shuffle(shuffled)
        orders.append([replace(j, submit_time=float(i)) for i, j in enumerate(shuffled)])
    for sharing in args.sharing.split(","):
        for placement in args.placements.split(","):
            got = [fill(jobs, cluster, sharing, placement) for jobs in orders]
            idle = [g[0] for g in got]
            placed = [float(g[1]) for g in got]
            print(
                f"{sharing:6} {placement:9} unallocated at first failure "
                f"{_spread(idle, 100, '%')}, tasks placed {_spread(placed, 1, '')}; "
                f"trace order {got[0][2]}",
                flush=True,
            )


def _spread(values: list[float], scale: float, unit: str) -> str:
    lo, mid, hi = min(values) * scale, statistics.median(values) * scale, max(values) * scale
    return f"{lo:.1f} / {mid:.1f} / {hi:.1f}{unit}"


if __name__ == "__main__":
    main()
