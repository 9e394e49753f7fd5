"""The forecast runs the scheduler forward: pending jobs start when running ones reach
their limits, in priority order with backfill; what waits behind a job with no limit,
or is held, gets no forecast; dependencies and --begin are honoured."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.jobspec.job import Dependency
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Policy
from podium.sim.forecast import forecast
from podium.sim.forecast_bound import NEVER_FREE, estimate_beyond

NODE = NodeView("n0", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(i, "h100") for i in range(4)))


def job(job_id: int, gpus: int, limit: float | None = 100.0, **kw: object) -> PendingJob:
    return PendingJob(
        job_id=job_id, user="u", name=f"j{job_id}", partition="main", qos_priority=100,
        submit_time=float(job_id), gpus=gpus, time_limit_s=limit, **kw,
    )  # type: ignore[arg-type]  # fmt: skip


def running(job_id: int, gpus: tuple[int, ...], limit: float | None) -> Allocation:
    return Allocation(job_id=job_id, node="n0", user="u", gpu_indices=gpus, start_time=0.0,
                      time_limit_s=limit)  # fmt: skip


def test_jobs_start_as_running_ones_reach_their_limits() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1), 100), running(2, (2, 3), 300)),
        pending=(job(3, 2, limit=50), job(4, 4)),
    )
    got = forecast(snap, now=10, policy=Policy())
    assert got.starts[3].start == 100 and set(got.starts[3].gpu_indices) == {0, 1}
    assert got.starts[4].start == 300 and got.starts[4].node == "n0"


def test_backfill_is_forecast_too() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2), 1000),),
        pending=(job(2, 4, limit=100), job(3, 1, limit=500)),  # 3 fits before 2 may start
    )
    got = forecast(snap, now=0, policy=Policy())
    assert got.starts[3].start == 0 and got.starts[2].start == 1000


def test_no_limit_held_and_impossible_jobs_get_no_forecast() -> None:
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0, 1, 2, 3), None),),
        pending=(job(2, 1), job(3, 1, held=True)),
    )
    assert forecast(snap, now=0, policy=Policy()).starts == {}
    snap = Snapshot(nodes=(NODE,), pending=(job(2, 1), job(3, 1, held=True)))
    assert set(forecast(snap, now=0, policy=Policy()).starts) == {2}


def test_dependencies_and_begin_times() -> None:
    after = (Dependency(kind="afterok", job_ids=(1,)),)
    snap = Snapshot(
        nodes=(NODE,),
        running=(running(1, (0,), 200),),
        pending=(job(2, 1, dependencies=after), job(3, 1, begin_time=500.0)),
        job_states={1: "RUNNING"},
    )
    got = forecast(snap, now=0, policy=Policy())
    assert got.starts[2].start == 200 and got.starts[3].start == 500


def test_an_array_starts_its_tasks_as_room_comes() -> None:
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1, 2), 100),),
                    pending=(job(2, 1, count=3),))  # fmt: skip
    got = forecast(snap, now=0, policy=Policy())
    assert got.starts[2].start == 0  # its first task starts at once


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(10, 500)), min_size=1, max_size=12))
def test_the_first_pass_agrees_with_the_scheduler(jobs: list[tuple[int, int]]) -> None:
    """What a forecast says starts now is exactly what the daemon's next pass starts,
    and no forecast start is in the past or beyond what the jobs' limits allow."""
    pending = tuple(job(i + 1, g, limit=float(lim)) for i, (g, lim) in enumerate(jobs))
    snap = Snapshot(nodes=(NODE,), pending=pending)
    got = forecast(snap, now=0, policy=Policy(), max_passes=500)
    now_starts = {s.job_id for s in schedule(snap, 0, Policy()).starts}
    assert {j for j, e in got.starts.items() if e.start == 0} == now_starts
    assert set(got.starts) == {p.job_id for p in pending}  # all fit the node in the end
    assert all(0 <= e.start <= sum(lim for _, lim in jobs) for e in got.starts.values())


def test_a_job_whose_progress_says_it_ends_early_frees_its_gpus_then() -> None:
    reported = Allocation(job_id=1, node="n0", user="u", gpu_indices=(0, 1, 2, 3),
                          start_time=0.0, time_limit_s=3600, expected_end=400.0)  # fmt: skip
    snap = Snapshot(nodes=(NODE,), running=(reported,), pending=(job(2, 2),))
    assert forecast(snap, now=100, policy=Policy()).starts[2].start == 400
    late = replace(reported, expected_end=5000.0)  # beyond its limit: the limit holds
    snap = Snapshot(nodes=(NODE,), running=(late,), pending=(job(2, 2),))
    assert forecast(snap, now=100, policy=Policy()).starts[2].start == 3600
    endless = replace(reported, time_limit_s=None)  # no limit, but its progress tells
    snap = Snapshot(nodes=(NODE,), running=(endless,), pending=(job(2, 2),))
    assert forecast(snap, now=100, policy=Policy()).starts[2].start == 400


def test_a_job_past_its_expected_end_ends_at_once() -> None:
    overdue = Allocation(job_id=1, node="n0", user="u", gpu_indices=(0, 1, 2, 3),
                         start_time=0.0, time_limit_s=None, expected_end=50.0)  # fmt: skip
    snap = Snapshot(nodes=(NODE,), running=(overdue,), pending=(job(2, 2), job(3, 2)))
    got = forecast(snap, now=100, policy=Policy())
    assert got.starts[2].start == 100 and got.starts[3].start == 100


def test_beyond_its_passes_every_job_gets_an_estimate_or_the_reason_there_is_none() -> None:
    """Issue 62: a deep queue past the pass budget: each job beyond it is estimated at
    the work ahead of it over the GPUs it can use (in queue order, from where the
    passes stopped); held and never-fitting jobs, and jobs behind one with no limit,
    get the reason instead."""
    queue = [job(i, 4, limit=100.0) for i in range(3, 13)]  # ten whole-node jobs
    queue += [job(13, 1, held=True), job(14, 8), job(15, 2, limit=None), job(16, 1)]
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1, 2, 3), 100),), pending=tuple(queue))
    got = forecast(snap, now=0, policy=Policy(), max_passes=3)
    assert set(got.starts) == {3, 4}  # three passes: at 0 (none), 100 and 200
    beyond = got.beyond
    # the passes stopped at t=300, when job 4 ends: nothing runs, nothing ahead of job 5
    assert beyond.estimates[5] == 300.0
    assert beyond.estimates[12] == 300.0 + 7 * 4 * 100 / 4  # seven whole-node jobs ahead
    assert beyond.unknown[13] == "held" and beyond.unknown[14] == "fits no node"
    assert beyond.estimates[15] == 1100.0  # ahead of it: jobs 5-12, 800 s of the node
    assert beyond.unknown[16].startswith("behind a job with no time limit (job 15)")
    covered = set(got.starts) | set(beyond.estimates) | set(beyond.unknown)
    assert covered == {j.job_id for j in queue}


def test_nothing_beyond_when_nothing_running_ever_ends() -> None:
    snap = Snapshot(nodes=(NODE,), running=(running(1, (0, 1, 2, 3), None),),
                    pending=(job(2, 1),))  # fmt: skip
    got = forecast(snap, now=0, policy=Policy())
    assert got.starts == {} and got.beyond.unknown == {2: NEVER_FREE}


def test_the_estimate_uses_the_room_as_running_jobs_free_it() -> None:
    """The fluid model: the room frees as running jobs end, and the work ahead runs in
    it: two GPUs free at 100 and two more at 1000; the first job waiting starts at 100,
    the second once the first's 1,000 GPU-seconds have run in the freed room (600)."""
    first, second = job(1, 2, limit=500.0), job(2, 2, limit=100.0)
    ahead = (running(8, (0, 1), 100.0), running(9, (2, 3), 1000.0))
    got = estimate_beyond((NODE,), ahead, [first, second], 0.0)
    assert got.estimates == {1: 100.0, 2: 600.0} and got.unknown == {}
