"""Least attained service (podium.sched.las): queues, order, victims, thrash bound."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.api.states import PreemptMode
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.las import attained_by_job, next_change, pending_queue, victims
from podium.sched.model import Elastic, LasRules, Policy
from podium.sched.order import queue_order
from podium.sched.passed import PassedClock

NODE = NodeView("n0", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(i, "h100") for i in range(4)))
RULES = LasRules(queue_limits_gpu_s=(1000.0, 8000.0), min_run_s=60.0, starve_factor=2.0)
LAS = Policy(las=RULES)


def pending(job_id: int, gpus: int = 1, submit: float = 0.0, **kw: object) -> PendingJob:
    kw = {"partition": "main", "qos_priority": 0, "time_limit_s": 3600.0, **kw}
    return PendingJob(
        job_id=job_id, user="u", name=f"j{job_id}", submit_time=submit, gpus=gpus,
        **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def run_alloc(job_id: int, gpus: tuple[int, ...], start: float, **kw: object) -> Allocation:
    kw = {"time_limit_s": 3600.0, **kw}
    return Allocation(
        job_id=job_id, node="n0", user="u", gpu_indices=gpus, start_time=start,
        saves=True, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_queues_are_cut_by_attained_gpu_seconds() -> None:
    assert RULES.queue_of(0.0) == 0
    assert RULES.queue_of(999.0) == 0
    assert RULES.queue_of(1000.0) == 1
    assert RULES.queue_of(9000.0) == 2
    # a running job: its earlier runs plus its GPUs times this run so far, all nodes
    a = run_alloc(1, (0, 1), start=100.0, attained_gpu_s=50.0)
    b = replace(a, node="n1")
    assert attained_by_job([a, b], now=200.0) == {1: 50.0 + 2 * 100 + 2 * 100}


def test_a_new_job_goes_before_one_that_has_had_service_and_submit_order_holds_within() -> None:
    served = pending(1, submit=0.0, attained_gpu_s=2000.0, queued_at=500.0)
    late, early = pending(3, submit=300.0), pending(2, submit=200.0)
    snap = Snapshot(nodes=(replace(NODE, gpus=NODE.gpus[:1]),), pending=(served, late, early))
    got = schedule(snap, now=600.0, policy=LAS)
    assert [s.job_id for s in got.starts] == [2]  # queue 0, earliest submit


def test_the_starvation_guard_sends_a_long_waiting_job_back_to_queue_zero() -> None:
    # it ran 1,000 s on 2 GPUs: after 2 x 1,000 s in the queue it is promoted
    job = pending(1, gpus=2, attained_gpu_s=2000.0, queued_at=100.0)
    assert pending_queue(job, 2099.0, RULES) == 1
    assert pending_queue(job, 2100.0, RULES) == 0
    assert pending_queue(job, 2100.0, replace(RULES, starve_factor=None)) == 1


def test_a_new_job_preempts_one_past_the_first_limit_that_saves_and_is_requeued() -> None:
    old = run_alloc(9, (0, 1, 2, 3), start=0.0)  # 4 GPUs x 300 s = 1,200 GPU-s: queue 1
    snap = Snapshot(nodes=(NODE,), running=(old,), pending=(pending(1, submit=250.0),))
    got = schedule(snap, now=300.0, policy=LAS)
    assert [(p.job_id, p.for_job, p.mode) for p in got.preempts] == [(9, 1, PreemptMode.REQUEUE)]
    assert not got.starts  # it starts once the victim has saved and stopped


def test_no_victim_below_the_limit_nor_one_that_does_not_save_nor_one_run_too_briefly() -> None:
    new = pending(1, submit=250.0)
    young = run_alloc(9, (0, 1, 2, 3), start=0.0)  # 1,200 GPU-s at 300 s
    for running, now in [
        (replace(young, start_time=100.0), 300.0),  # 800 GPU-s: queue 0 too
        (replace(young, saves=False), 300.0),  # would lose its work
        (replace(young, attained_gpu_s=5000.0, start_time=260.0), 300.0),  # ran 40 s < 60 s
    ]:
        snap = Snapshot(nodes=(NODE,), running=(running,), pending=(new,))
        assert not schedule(snap, now=now, policy=LAS).preempts, running


def test_a_job_of_a_later_queue_does_not_preempt_one_of_an_earlier_queue() -> None:
    served = pending(1, attained_gpu_s=9000.0, queued_at=10_000.0)  # queue 2, not starved
    running = run_alloc(9, (0, 1, 2, 3), start=9_000.0)  # 4,000 GPU-s: queue 1
    snap = Snapshot(nodes=(NODE,), running=(running,), pending=(served,))
    assert not schedule(snap, now=10_000.0, policy=LAS).preempts


def test_next_change_is_when_a_running_job_crosses_a_limit_or_may_be_stopped() -> None:
    a = run_alloc(9, (0, 1), start=100.0, attained_gpu_s=400.0)  # 2 GPUs: 1,000 at 400 s
    assert next_change([a], [], now=120.0, rules=RULES) == 160.0  # min run first
    assert next_change([a], [], now=200.0, rules=RULES) == 400.0
    waiting = pending(1, gpus=1, attained_gpu_s=100.0, queued_at=300.0)  # promoted at 500
    assert next_change([], [waiting], now=350.0, rules=RULES) == 500.0
    assert next_change([replace(a, saves=False)], [], now=200.0, rules=RULES) is None
    # an elastic job that never checkpointed may still be shrunk once past a limit
    grows = replace(a, saves=False, elastic=Elastic(1, 2, 1, gpus=1, cpus=1, mem_mb=100))
    assert next_change([grows], [], now=200.0, rules=RULES) == 400.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.floats(0, 20_000), st.floats(0, 500)),
        min_size=1,
        max_size=4,
    ),
    st.floats(0, 5000),
)
def test_victims_are_always_of_a_later_queue_and_ran_the_minimum(
    runs: list[tuple[int, float, float]], attained_new: float
) -> None:
    now = 1000.0
    allocs, next_gpu = [], 0
    for i, (gpus, before, started_ago) in enumerate(runs):
        take = tuple(range(next_gpu, min(4, next_gpu + gpus)))
        next_gpu += len(take)
        if not take:
            break
        allocs.append(run_alloc(10 + i, take, start=now - started_ago, attained_gpu_s=before))
    new = pending(1, gpus=4, attained_gpu_s=attained_new, queued_at=now)
    snap = Snapshot(nodes=(NODE,), running=tuple(allocs), pending=(new,))
    got = schedule(snap, now=now, policy=LAS)
    mine = pending_queue(new, now, RULES)
    service = attained_by_job(allocs, now)
    for p in got.preempts:
        victim = next(a for a in allocs if a.job_id == p.job_id)
        assert RULES.queue_of(service[p.job_id]) > mine
        assert now - victim.start_time >= RULES.min_run_s


def test_a_job_a_waiting_qos_may_preempt_goes_after_it() -> None:
    """Else the victim of a QoS preemption would restart first and be stopped again."""
    qos = Policy(las=RULES, preempts={"high": frozenset({"low"})})
    victim = pending(1, submit=0.0, qos="low", attained_gpu_s=50.0, queued_at=20.0)
    urgent = pending(2, submit=10.0, qos="high")
    normal = pending(3, submit=5.0, qos="normal")
    order, _ = queue_order(Snapshot(nodes=(NODE,), pending=(victim, urgent, normal)), 30.0, qos)
    assert [j.job_id for j in order] == [3, 2, 1]  # all of QoS priority 0 here


def test_a_higher_qos_goes_first_and_least_attained_service_orders_within_a_qos() -> None:
    """Issue 62: QoS priority orders the queue as Slurm's does (below partition tiers),
    whatever the service; within a QoS, the queue, then submit order."""
    tiers = Policy(las=RULES, partition_tiers={"urgent": 1})
    low = pending(1, submit=0.0, qos="low", qos_priority=0)
    normal = pending(2, submit=1.0, qos="normal", qos_priority=10)
    high_served = pending(3, submit=2.0, qos="high", qos_priority=100,
                          attained_gpu_s=5000.0, queued_at=1000.0)  # fmt: skip
    high = pending(4, submit=3.0, qos="high", qos_priority=100)
    tiered = pending(5, submit=4.0, qos="low", qos_priority=0, partition="urgent")
    jobs = (low, normal, high_served, high, tiered)
    order, _ = queue_order(Snapshot(nodes=(NODE,), pending=jobs), 1010.0, tiers)
    assert [j.job_id for j in order] == [5, 4, 3, 2, 1]
    # with only the 2 GPUs a 2-GPU job needs free, the high one starts, not the earlier
    busy = run_alloc(9, (0, 1), start=1000.0, qos="normal")
    two = (replace(low, gpus=2), replace(normal, gpus=2), replace(high, gpus=2))
    got = schedule(Snapshot(nodes=(NODE,), pending=two, running=(busy,)), 1010.0, LAS)
    assert [s.job_id for s in got.starts] == [4]


def test_the_wait_guard_is_the_limit_within_its_floor_and_cap() -> None:
    """Issue 62: a job is overdue once it has waited its time limit times wait_factor,
    at least the floor and at most the cap (the cap for a job with no limit), and not
    before a later job first passed it; never when nobody has, nor without a guard."""
    rules = LasRules(wait_factor=1.0, wait_floor_s=300.0, wait_cap_s=86400.0)
    passed = {"submit": 0.0, "passed_at": 100.0}
    assert rules.overdue_at(pending(1, time_limit_s=60.0, **passed)) == 300.0  # the floor
    assert rules.overdue_at(pending(1, **passed)) == 3600.0
    assert rules.overdue_at(pending(1, time_limit_s=7 * 86400.0, **passed)) == 86400.0
    assert rules.overdue_at(pending(1, time_limit_s=None, **passed)) == 86400.0  # the cap
    late = pending(1, time_limit_s=60.0, submit=0.0, passed_at=5000.0)
    assert rules.overdue_at(late) == 5000.0  # waited long, but nobody passed it until then
    assert rules.overdue_at(pending(1, submit=0.0)) is None  # nobody passed it
    assert replace(rules, wait_factor=None).overdue_at(pending(1, **passed)) is None
    assert LasRules().overdue_at(pending(1, **passed)) == 900.0  # the default: a quarter


def test_a_requeued_job_has_spent_the_wait_of_its_earlier_stays() -> None:
    """Issue 62's tail: a job least attained service stopped waits again; its waits
    before add up against one allowance, so stops cannot add up without bound."""
    rules = LasRules(wait_factor=1.0, wait_floor_s=60.0)
    again = pending(1, submit=0.0, queued_at=9000.0, waited_s=1000.0, passed_at=9010.0)
    assert rules.overdue_at(again) == 9000.0 + 3600.0 - 1000.0
    spent = replace(again, waited_s=5000.0)  # more than its allowance: due when passed
    assert rules.overdue_at(spent) == 9010.0
    started = again.allocate("n0", (0,), now=9500.0)
    assert started.waited_s == 1500.0  # its earlier stays and this one's
    assert rules.spent_wait(replace(started, waited_s=3600.0))
    assert not rules.spent_wait(started)


def test_a_job_that_waited_its_allowance_is_not_stopped_for_a_newer_one() -> None:
    """Issue 62's tail: least attained service does not stop a job that has waited its
    whole wait guard allowance before its run: it runs to its end."""
    new = pending(1, submit=5000.0)
    attained = {9: 5000.0}
    rules = replace(RULES, wait_factor=1.0)
    patient = run_alloc(9, (0,), start=0.0, time_limit_s=9000.0, waited_s=9000.0)
    may = victims(new, 5000.0, rules, attained, {})
    assert not may(patient) and may(replace(patient, waited_s=8999.0))
    unguarded = victims(new, 5000.0, replace(rules, wait_factor=None), attained, {})
    assert unguarded(patient)  # no wait guard: no allowance to have spent


def test_no_job_is_stopped_for_service_while_an_overdue_job_waits() -> None:
    """Issue 62's tail: while a job overdue by the wait guard waits in a partition, least
    attained service stops nothing there (the stop would lengthen a queue already late);
    once none is overdue it stops as before."""
    old = run_alloc(9, (0, 1, 2, 3), start=0.0)  # 1,200 GPU-s at 300 s: queue 1
    rules = replace(RULES, wait_factor=1.0, wait_floor_s=60.0)
    new = pending(1, submit=250.0)
    late = pending(2, gpus=4, submit=0.0, time_limit_s=100.0, passed_at=10.0)  # overdue
    snap = Snapshot(nodes=(NODE,), running=(old,), pending=(new, late))
    assert not schedule(snap, now=300.0, policy=Policy(las=rules)).preempts
    snap = Snapshot(nodes=(NODE,), running=(old,), pending=(new,))
    assert [p.job_id for p in schedule(snap, now=300.0, policy=Policy(las=rules)).preempts] == [9]


def test_an_overdue_job_goes_before_a_higher_qos_the_earliest_due_first_below_tiers() -> None:
    """Issue 62: the wait guard bounds a low-QoS job's wait once later jobs pass it:
    overdue, it goes before every job of its partition tier that is not, whatever
    their QoS, the earliest due first; a higher partition tier still goes first. Jobs
    that nobody passed keep the QoS order however long they wait."""
    rules = replace(RULES, wait_factor=1.0, wait_floor_s=300.0)
    policy = Policy(las=rules, partition_tiers={"urgent": 1})
    low_long = pending(1, submit=0.0, qos="low", qos_priority=0, passed_at=0.0)  # due 3600
    low_short = pending(2, submit=100.0, qos="low", qos_priority=0, time_limit_s=60.0,
                        passed_at=100.0)  # due at 400  # fmt: skip
    high = pending(3, submit=3000.0, qos="high", qos_priority=100)
    tiered = pending(4, submit=3500.0, qos="low", qos_priority=0, partition="urgent")
    waited = pending(5, submit=0.0, qos="low", qos_priority=0)  # long, but nobody passed it
    jobs = (low_long, low_short, high, tiered, waited)
    order, _ = queue_order(Snapshot(nodes=(NODE,), pending=jobs), 200.0, policy)
    assert [j.job_id for j in order] == [4, 3, 1, 5, 2]  # none overdue: tier, QoS, submit
    order, _ = queue_order(Snapshot(nodes=(NODE,), pending=jobs), 3700.0, policy)
    assert [j.job_id for j in order] == [4, 2, 1, 3, 5]  # 2 due at 400, 1 at 3600
    # the next pass that may order differently: when the next job becomes overdue
    assert next_change((), jobs, 200.0, rules) == 400.0


def test_a_job_is_passed_when_one_submitted_after_it_starts_while_it_waits() -> None:
    """Issue 62: the wait guard's clock: the jobs submitted before one that starts are
    passed then (once: the first time counts); a job that joins the queue again waits
    afresh; `mark` gives the queue with each job's time."""
    clock = PassedClock()
    for job_id, submit in ((1, 0.0), (2, 10.0), (3, 20.0), (4, 30.0)):
        clock.queued(job_id, submit)
    assert clock.started(3, 20.0, now=100.0) == [1, 2]
    assert clock.started(4, 30.0, now=200.0) == []  # 1 and 2 were passed at 100 already
    assert (clock.at(1), clock.at(2), 3 in clock) == (100.0, 100.0, False)
    clock.queued(2, 10.0)  # requeued: nobody has passed it in this stay
    assert clock.at(2) is None
    queue = {1: pending(1, submit=0.0), 2: pending(2, submit=10.0), 5: pending(5, submit=40.0)}
    marked = clock.mark(queue)
    assert (marked[1].passed_at, marked[2] is queue[2], 5 in clock) == (100.0, True, True)
    assert clock.view({1: queue[1]})[1].passed_at == 100.0


def test_a_job_due_to_end_within_the_minimum_run_is_left_to_finish() -> None:
    """Issue 62: least attained service does not stop a job whose limit ends within
    min_run: a save and a restart for so little is all cost."""
    new = pending(1, submit=5000.0)
    attained = {9: 5000.0}
    ending = run_alloc(9, (0,), start=0.0, time_limit_s=5030.0)  # ends in 30 s < 60 s
    going = run_alloc(9, (0,), start=0.0, time_limit_s=9000.0)  # in 4000 s
    may = victims(new, 5000.0, RULES, attained, {})
    assert not may(ending) and may(going)


def test_every_overdue_job_holds_a_reservation_not_only_the_first() -> None:
    """Issue 62: under EASY backfill only the first blocked job holds a reservation; a
    large overdue job behind smaller overdue ones would then never hold one. Each
    overdue job holds one on nodes not yet reserved; a job that is not overdue does
    not."""
    nodes = tuple(replace(NODE, name=n) for n in ("n0", "n1", "n2"))
    running = tuple(
        replace(run_alloc(10 + i, (0, 1, 2, 3), start=0.0, time_limit_s=end), node=n, saves=False)
        for i, (n, end) in enumerate((("n0", 9000.0), ("n1", 9500.0), ("n2", 9800.0)))
    )
    rules = replace(RULES, wait_factor=1.0, wait_floor_s=60.0)
    late = [pending(i, gpus=4, submit=0.0, time_limit_s=100.0, passed_at=10.0)  # overdue
            for i in (1, 2)]  # fmt: skip
    fresh = pending(3, gpus=4, submit=8990.0, time_limit_s=100.0)  # nobody passed it
    snap = Snapshot(nodes=nodes, pending=(*late, fresh), running=running)
    got = schedule(snap, 9000.0 - 1.0, Policy(las=rules))
    held = {(r.job_id, r.node, r.start_time) for r in got.reservations}
    assert held == {(1, "n0", 9000.0), (2, "n1", 9500.0)}


def test_overdue_look_alikes_each_hold_a_reservation_in_the_daemons_grouped_walk() -> None:
    """Issue 62's longest waits: the daemon and the simulator walk the queue by groups
    of like requests and skip a group's rest once one of it cannot start; overdue jobs
    of one group are not skipped: each holds a reservation of its own."""
    from podium.sched.order import PendingGroups, orders_by_limit

    nodes = tuple(replace(NODE, name=n) for n in ("n0", "n1", "n2"))
    running = tuple(
        replace(run_alloc(10 + i, (0, 1, 2, 3), start=0.0, time_limit_s=end), node=n, saves=False)
        for i, (n, end) in enumerate((("n0", 9000.0), ("n1", 9500.0), ("n2", 9800.0)))
    )
    policy = Policy(las=replace(RULES, wait_factor=1.0, wait_floor_s=60.0))
    late = tuple(pending(i, gpus=4, submit=float(i), time_limit_s=100.0, passed_at=10.0)
                 for i in (1, 2, 3))  # fmt: skip
    groups = PendingGroups(orders_by_limit(policy))
    for job in late:
        groups.add(job)
    snap = Snapshot(nodes=nodes, pending=late, running=running, groups=list(groups.groups.values()))
    got = schedule(snap, 9000.0 - 1.0, policy, explain=False)  # as the daemon's passes
    assert {(r.job_id, r.node) for r in got.reservations} == {(1, "n0"), (2, "n1"), (3, "n2")}
