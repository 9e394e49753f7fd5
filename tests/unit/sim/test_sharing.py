"""The simulator's GPU sharing: fractional requests served whole, by MPS units or by
the advisor's MIG slices, through the same scheduling core."""

from __future__ import annotations

import pytest

from podium.sim.engine import SimOptions, simulate, uniform_nodes
from podium.sim.metrics import summarize
from podium.sim.sharing import mig_profile, plan
from podium.sim.traces import TraceJob


def tenth(job_id: int, submit: float = 0.0) -> TraceJob:
    """A task asking for 0.3 of one GPU for 100 s."""
    return TraceJob(job_id, submit, gpus=1, duration=100.0, gpu_milli=300)


def test_a_fraction_takes_the_smallest_slice_with_its_compute() -> None:
    assert [mig_profile(m) for m in (100, 150, 300, 430, 571, 600, 810)] == [
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "4g.40gb",
        None,  # more than 4 of 7 compute slices: a whole GPU
        None,
    ]


def test_sharing_packs_fractional_tasks_on_fewer_gpus() -> None:
    nodes = uniform_nodes(1, 2, 16, 64000)
    trace = [tenth(i) for i in range(6)]  # six 0.3-GPU tasks on 2 GPUs
    whole = summarize(simulate(trace, nodes, "fifo", SimOptions(sharing="whole")))
    mps = summarize(simulate(trace, nodes, "fifo", SimOptions(sharing="mps")))
    mig = summarize(simulate(trace, nodes, "fifo", SimOptions(sharing="mig")))
    assert whole["finished"] == mps["finished"] == mig["finished"] == 6
    assert whole["makespan_s"] == 300.0  # two at a time, one per GPU
    # MPS: 3 units of 10 each, 3 tasks per GPU; both GPUs shared (all demand is fractional)
    assert mps["makespan_s"] == 100.0 and mps["avg_wait_s"] == 0.0
    assert mps["used_util"] == pytest.approx(whole["used_util"] * 3)  # same work, a third the time
    # MIG: 3g.40gb slices, two per GPU (the advisor's layout for this mix)
    layouts = plan(trace, nodes, "mig").layouts
    assert layouts == (("3g.40gb", "3g.40gb"), ("3g.40gb", "3g.40gb"))
    assert mig["makespan_s"] == 200.0


def test_whole_gpu_jobs_keep_whole_gpus_and_mps_never_mixes_them() -> None:
    nodes = uniform_nodes(1, 4, 16, 64000)
    trace = [tenth(0), TraceJob(1, 0.0, gpus=2, duration=100.0), tenth(2)]
    sharing = plan(trace, nodes, "mps", units=10)
    assert sharing.shared_per_node == 2  # half the rounded-up GPU-time is fractional
    view = sharing.view(nodes[0])
    assert sum(1 for g in view.gpus if g.whole) == 2 and len(view.gpus) == 2 + 2 * 10
    result = summarize(simulate(trace, nodes, "fifo", SimOptions(sharing="mps")))
    assert result["finished"] == 3 and result["makespan_s"] == 100.0
