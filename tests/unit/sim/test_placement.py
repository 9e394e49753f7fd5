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
