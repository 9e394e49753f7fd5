"""The simulator's least attained service: a preempted job holds its GPUs while it
saves, keeps its work, pays its restart, and counts its service (podium.sim.replay)."""

from __future__ import annotations

from podium.sched.model import LasRules, Policy
from podium.sim import engine
from podium.sim.engine import SimOptions, simulate, uniform_nodes
from podium.sim.traces import TraceJob


def test_a_served_job_is_stopped_for_a_new_one_and_charged_its_save_and_restart() -> None:
    rules = LasRules(queue_limits_gpu_s=(400.0,), min_run_s=100.0, starve_factor=None)
    engine.POLICIES["las-test"] = Policy(las=rules)
    try:
        trace = [
            TraceJob(job_id=1, submit_time=0.0, gpus=4, duration=1000.0),
            TraceJob(job_id=2, submit_time=200.0, gpus=1, duration=100.0),
        ]
        options = SimOptions(save_s=5.0, restart_cost_s=10.0)
        got = simulate(trace, uniform_nodes(1, 4, 8, 8000), "las-test", options)
    finally:
        del engine.POLICIES["las-test"]
    by = {o.job.job_id: o for o in got.outcomes}
    assert got.preemptions == 1 and by[1].preemptions == 1 and by[1].lost_seconds == 0
    # job 1 (800 GPU-s by 200 s: queue 1) saves until 205; job 2 runs 205-305; job 1
    # starts again at 305, restarts for 10 s and does its 800 s left
    assert (by[2].first_start, by[2].end) == (205.0, 305.0)
    assert by[1].end == 305.0 + 10.0 + 800.0
    assert by[1].gpu_seconds == 4 * 205.0 + 4 * 810.0


def test_without_a_crossing_nothing_is_preempted_and_the_order_is_fifo() -> None:
    trace = [
        TraceJob(job_id=1, submit_time=0.0, gpus=4, duration=50.0),  # 200 GPU-s at most
        TraceJob(job_id=2, submit_time=10.0, gpus=2, duration=10.0),
        TraceJob(job_id=3, submit_time=20.0, gpus=1, duration=10.0),
    ]
    nodes = uniform_nodes(1, 4, 8, 8000)
    las = simulate(trace, nodes, "las", SimOptions(save_s=5.0, restart_cost_s=10.0))
    fifo = simulate(trace, nodes, "fifo-backfill", SimOptions())
    assert las.preemptions == 0
    assert [(o.first_start, o.end) for o in las.outcomes] == [
        (o.first_start, o.end) for o in fifo.outcomes
    ]
