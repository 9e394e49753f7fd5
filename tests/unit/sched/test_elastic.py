"""Elastic jobs in a pass: start as large as fits, shrink instead of preempt, grow."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Elastic, Policy

NODE = NodeView("n0", cpus=64, memory_mb=64000, gpus=tuple(GpuSlot(i, "h100") for i in range(8)))
QOS = {"low": 10, "normal": 100, "high": 1000}
PREEMPTS = {"normal": frozenset({"low"}), "high": frozenset({"low", "normal"})}
POLICY = Policy(
    qos_priority=QOS, preempts=PREEMPTS, elastic_min_stable_s=300, elastic_grow_delay_s=60
)


def elastic_job(job_id: int, low: int, high: int, step: int = 1, qos: str = "low") -> PendingJob:
    e = Elastic(low, high, step, gpus=1, cpus=2, mem_mb=1000)
    return PendingJob(
        job_id=job_id, user="amy", name="train", partition="main", qos_priority=QOS[qos],
        submit_time=job_id, gpus=low, cpus=2 * low, mem_mb=1000 * low, qos=qos, account="a",
        elastic=e,
    )  # fmt: skip


def plain(job_id: int, gpus: int, qos: str = "normal") -> PendingJob:
    return PendingJob(
        job_id=job_id, user="bob", name="j", partition="main", qos_priority=QOS[qos],
        submit_time=job_id, gpus=gpus, cpus=1, mem_mb=100, qos=qos, account="b",
    )  # fmt: skip


def running_elastic(
    job_id: int, gpus: range, low: int, high: int, start: float, qos: str = "low", step: int = 1
) -> Allocation:
    e = Elastic(low, high, step, gpus=1, cpus=2, mem_mb=1000)
    n = len(gpus)
    return Allocation(
        job_id=job_id, node="n0", user="amy", gpu_indices=tuple(gpus), cpus=2 * n,
        mem_mb=1000 * n, qos=qos, account="a", start_time=start, elastic=e,
    )  # fmt: skip


def other(job_id: int, gpus: range) -> Allocation:
    return Allocation(job_id=job_id, node="n0", user="bob", gpu_indices=tuple(gpus), qos="normal")


def test_an_elastic_job_starts_as_large_as_fits() -> None:
    busy = (other(9, range(0, 3)),)
    d = schedule(Snapshot(nodes=(NODE,), running=busy, pending=(elastic_job(1, 1, 8),)), 0, POLICY)
    [start] = d.starts
    assert (len(start.gpu_indices), start.cpus, start.mem_mb) == (5, 10, 5000)
    d = schedule(
        Snapshot(nodes=(NODE,), running=busy, pending=(elastic_job(1, 2, 8, 2),)), 0, POLICY
    )
    assert len(d.starts[0].gpu_indices) == 4  # sizes 8, 6, 4, 2: 4 is the largest that fits
    full = (other(9, range(0, 7)),)
    d = schedule(Snapshot(nodes=(NODE,), running=full, pending=(elastic_job(1, 2, 8),)), 0, POLICY)
    assert d.starts == () and d.reasons[1] == "Resources"  # not even MIN fits


def test_a_higher_qos_shrinks_an_elastic_job_only_where_its_qos_may_preempt() -> None:
    """Issue 43: shrinking obeys the QoS preempt lists, as preemption does. A job of a
    higher QoS priority whose QoS preempts nothing waits: it neither shrinks a lower
    QoS's elastic job nor preempts it, however new that job is."""
    running = (running_elastic(5, range(0, 6), 2, 6, start=0), other(9, range(6, 8)))
    no_lists = dataclasses.replace(POLICY, preempts={})
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3),)), 10, no_lists)
    assert (d.resizes, d.preempts, d.reasons[1]) == ((), (), "Resources")
    only_high = dataclasses.replace(POLICY, preempts={"high": frozenset({"low"})})
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3),)), 10, only_high)
    assert d.resizes == ()  # normal preempts nothing here
    d = schedule(
        Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3, "high"),)), 10, only_high
    )
    assert [(r.job_id, r.replicas) for r in d.resizes] == [(5, 3)]
    # the same QoS priority: only once the elastic job has been stable long enough
    same = (running_elastic(5, range(0, 6), 2, 6, start=0, qos="normal"), other(9, range(6, 8)))
    d = schedule(Snapshot(nodes=(NODE,), running=same, pending=(plain(1, 3),)), 10, no_lists)
    assert d.resizes == ()
    d = schedule(Snapshot(nodes=(NODE,), running=same, pending=(plain(1, 3),)), 400, no_lists)
    assert [(r.job_id, r.replicas) for r in d.resizes] == [(5, 3)]


def test_a_higher_priority_job_shrinks_an_elastic_job_instead_of_preempting_it() -> None:
    running = (running_elastic(5, range(0, 6), 2, 6, start=0), other(9, range(6, 8)))
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3),)), 10, POLICY)
    assert [(r.job_id, r.replicas, r.for_job) for r in d.resizes] == [(5, 3, 1)]
    assert d.preempts == () and d.starts == () and d.reasons[1] == "Resources"
    # Never below MIN: with MIN 5, one replica is all it could give.
    floor = (running_elastic(5, range(0, 6), 5, 6, start=0), other(9, range(6, 8)))
    d = schedule(Snapshot(nodes=(NODE,), running=floor, pending=(plain(1, 3),)), 10, POLICY)
    assert d.resizes == ()


def test_several_elastic_jobs_shrink_together_when_one_is_not_enough() -> None:
    running = (
        running_elastic(5, range(0, 2), 1, 4, start=0),  # older: more to lose
        running_elastic(6, range(2, 4), 1, 4, start=50),
        other(9, range(4, 8)),
    )
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 2),)), 100, POLICY)
    assert sorted((r.job_id, r.replicas) for r in d.resizes) == [(5, 1), (6, 1)]
    assert d.preempts == ()
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3),)), 100, POLICY)
    assert d.resizes == ()  # even both at MIN free only 2


def test_the_same_qos_shrinks_it_only_once_it_has_been_stable() -> None:
    running = (running_elastic(5, range(0, 8), 2, 8, start=100, qos="normal"),)
    pending = (plain(1, 2),)
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=pending), 200, POLICY)
    assert d.resizes == ()  # it resized 100 s ago: min_stable is 300 s
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=pending), 400, POLICY)
    assert [(r.job_id, r.replicas) for r in d.resizes] == [(5, 6)]
    higher = (plain(2, 2, qos="high"),)
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=higher), 200, POLICY)
    assert [(r.job_id, r.replicas) for r in d.resizes] == [(5, 6)]  # a higher QoS need not wait


def test_an_elastic_job_grows_into_idle_gpus_when_nothing_waits() -> None:
    running = (running_elastic(5, range(0, 2), 2, 6, start=0), other(9, range(2, 3)))
    d = schedule(Snapshot(nodes=(NODE,), running=running), 100, POLICY)
    assert [(r.job_id, r.replicas, r.for_job) for r in d.resizes] == [(5, 6, None)]
    assert d.resizes[0].cause == "grow 2->6 into free GPUs"
    d = schedule(Snapshot(nodes=(NODE,), running=running), 30, POLICY)
    assert d.resizes == ()  # within grow_delay of its last start
    stepped = (running_elastic(5, range(0, 2), 2, 8, start=0, step=3), other(9, range(2, 5)))
    d = schedule(Snapshot(nodes=(NODE,), running=stepped), 100, POLICY)
    assert [r.replicas for r in d.resizes] == [5]  # sizes 8, 5, 2: 3 GPUs free hold 5
    waiting = (plain(1, 8),)  # a job waits for room: the free GPUs are not taken from it
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=waiting), 100, POLICY)
    assert d.resizes == ()


def test_an_elastic_job_grows_once_into_what_jobs_being_cancelled_free() -> None:
    """Two jobs cancelled at once end one after the other: the elastic job does not
    grow into the first one's GPUs while the second still ends, but into both after."""
    small = (running_elastic(5, range(0, 1), 1, 8, start=0), other(9, range(3, 8)))
    ending = dataclasses.replace(other(9, range(3, 8)), ending=True)
    d = schedule(Snapshot(nodes=(NODE,), running=(small[0], ending)), 100, POLICY)
    assert d.resizes == ()  # GPUs 1-2 are free, but 3-7 come free soon
    d = schedule(Snapshot(nodes=(NODE,), running=small[:1]), 100, POLICY)
    assert [r.replicas for r in d.resizes] == [8]  # once, into all of them
    d = schedule(Snapshot(nodes=(NODE,), running=small), 100, POLICY)
    assert [r.replicas for r in d.resizes] == [3]  # nothing ending: into what is free
    mine = dataclasses.replace(small[0], ending=True)  # itself cancelled: never grown
    assert schedule(Snapshot(nodes=(NODE,), running=(mine,)), 100, POLICY).resizes == ()


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8), st.integers(0, 8), st.integers(1, 3), st.integers(0, 8),
    st.sampled_from(["low", "normal", "high"]), st.integers(0, 1000),
)  # fmt: skip
def test_a_resize_stays_within_min_and_max_and_never_overcommits(
    low: int, extra: int, step: int, busy: int, qos: str, now: int
) -> None:
    high = min(8, low + extra)
    now_running = min(high, max(low, 8 - busy))
    if now_running + busy > 8:
        return
    running = (
        running_elastic(5, range(0, now_running), low, high, start=0, step=step),
        *((other(9, range(now_running, now_running + busy)),) if busy else ()),
    )
    pending = (plain(1, 1 + busy % 4, qos=qos),)
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=pending), now, POLICY)
    for r in d.resizes:
        assert low <= r.replicas <= high
        assert r.replicas in Elastic(low, high, step, 1, 2, 1000).sizes()
        if r.for_job is None:  # a grow fits what is free besides the job
            assert r.replicas - now_running <= 8 - now_running - busy


def test_spares_are_held_at_every_size_and_never_shrunk() -> None:
    """A job with a spare starts with its replicas and the spare (5 of 8 GPUs free: 4
    replicas and 1 spare), and a shrink takes replicas, never the spare."""
    e = Elastic(1, 8, 1, gpus=1, cpus=2, mem_mb=1000, spares=1)
    job = dataclasses.replace(elastic_job(1, 1, 8), elastic=e, gpus=2, cpus=4, mem_mb=2000)
    busy = (other(9, range(0, 3)),)
    d = schedule(Snapshot(nodes=(NODE,), running=busy, pending=(job,)), 0, POLICY)
    [start] = d.starts
    assert (len(start.gpu_indices), start.cpus, start.mem_mb) == (5, 10, 5000)
    held = Allocation(
        job_id=5, node="n0", user="amy", gpu_indices=tuple(range(0, 6)), cpus=12,
        mem_mb=6000, qos="low", account="a", start_time=0, elastic=e,
    )  # fmt: skip
    assert held.replicas == 5
    running = (held, other(9, range(6, 8)))
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=(plain(1, 3),)), 10, POLICY)
    assert [(r.job_id, r.replicas) for r in d.resizes] == [(5, 2)]  # replicas off; the spare kept


def test_under_least_attained_service_an_elastic_job_shrinks_only_for_less_service() -> None:
    """Same QoS, each elastic job stable past 300 s: under multifactor the waiting job
    takes replicas from either. Under least attained service (first limit 1,000
    GPU-seconds) it takes them only from the one past the limit (6 GPUs for 600 s:
    3,600 GPU-seconds), not from one still in queue 0 (2 GPUs for 400 s: 800)."""
    from podium.sched.model import LasRules

    las = dataclasses.replace(POLICY, las=LasRules((1000.0,), min_run_s=7200.0))
    past_limit = (running_elastic(1, range(0, 6), 2, 8, start=-600.0), other(9, range(6, 8)))
    in_queue_0 = (running_elastic(1, range(0, 2), 1, 8, start=-400.0), other(9, range(2, 8)))
    for busy, asks, shrinks_under_las in ((past_limit, 4, True), (in_queue_0, 1, False)):
        snap = Snapshot(nodes=(NODE,), running=busy, pending=(plain(5, asks, qos="low"),))
        assert [r.job_id for r in schedule(snap, 0.0, POLICY).resizes] == [1]
        got = schedule(snap, 0.0, las)
        assert [r.job_id for r in got.resizes] == ([1] if shrinks_under_las else [])
        assert not got.preempts and not got.starts
