"""`podium sim --placement fgd`: the replay weighs the trace's own mix of requests."""

from __future__ import annotations

from podium.sim.engine import SimOptions, uniform_nodes
from podium.sim.replay import Hooks, Replay
from podium.sim.traces import TraceJob


def test_fgd_replays_every_task_and_weighs_the_traces_mix() -> None:
    trace = [
        TraceJob(job_id=i, submit_time=float(i), gpus=1, duration=50.0, gpu_milli=milli)
        for i, milli in enumerate([300, 300, 700, 1000, 300, 700, 1000, 300])
    ]
    nodes = uniform_nodes(2, 4, 16, 64000)
    options = SimOptions(sharing="mps", placement="fgd")
    replay = Replay(trace, nodes, "fifo-backfill", options, Hooks())
    assert replay.policy.placement == "fgd"
    kinds = {(t, n): w for t, n, w in replay.workload}
    assert kinds == {("mps", 3): 4.0, ("mps", 7): 2.0, (None, 1): 2.0}
    got = replay.run()
    assert all(o.end is not None for o in got.outcomes) and len(got.outcomes) == 8
    plain = Replay(trace, nodes, "fifo-backfill", SimOptions(sharing="mps"), Hooks())
    assert plain.workload == () and plain.policy.placement == "best-fit"


def test_las_replays_end_aware_placement_and_placement_overrides_it() -> None:
    trace = [TraceJob(job_id=0, submit_time=0.0, gpus=1, duration=10.0)]
    nodes = uniform_nodes(1, 4, 16, 64000)
    assert Replay(trace, nodes, "las", SimOptions(), Hooks()).policy.placement == "end-aware"
    fifo = Replay(trace, nodes, "fifo-backfill", SimOptions(), Hooks())
    assert fifo.policy.placement == "best-fit"
    forced = Replay(trace, nodes, "las", SimOptions(placement="best-fit"), Hooks())
    assert forced.policy.placement == "best-fit"


def test_end_aware_keeps_the_node_that_frees_first_whole_for_a_gang() -> None:
    """Two 4-GPU nodes: a 10 s and a 1,000 s job of 3 GPUs each, then a 1-GPU job and a
    4-GPU job. Best fit puts the 1-GPU job beside the 10 s job (the first node with one
    free GPU), so the 4-GPU job waits for it (500 s); end-aware puts it beside the
    1,000 s job, and the 4-GPU job starts when the 10 s job ends."""
    trace = [
        TraceJob(job_id=0, submit_time=0.0, gpus=3, duration=10.0),
        TraceJob(job_id=1, submit_time=0.0, gpus=3, duration=1000.0),
        TraceJob(job_id=2, submit_time=1.0, gpus=1, duration=500.0),
        TraceJob(job_id=3, submit_time=2.0, gpus=4, duration=100.0),
    ]
    nodes = uniform_nodes(2, 4, 16, 64000)

    def gang_start(placement: str) -> float | None:
        options = SimOptions(placement=placement)
        outcomes = Replay(trace, nodes, "fifo-backfill", options, Hooks()).run().outcomes
        return next(o.first_start for o in outcomes if o.job.job_id == 3)

    assert gang_start("best-fit") == 501.0
    assert gang_start("end-aware") == 10.0
