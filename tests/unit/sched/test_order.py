"""Queue order: the grouped, lazy walk decides exactly what the full sort decides."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Policy, QosLimits
from podium.sched.order import GroupedOrder, PendingGroups, group_of, orders_by_limit, queue_order
from podium.sched.priority import PriorityWeights

NODES = tuple(
    NodeView(f"n{i}", cpus=16, memory_mb=64000, gpus=tuple(GpuSlot(g, "h100") for g in range(4)))
    for i in range(3)
)
QOS = {"low": 10, "normal": 100, "high": 1000}
POLICIES = {
    "fifo": Policy(use_priority=False, backfill=False, preemption=False),
    "fifo-backfill": Policy(use_priority=False, backfill=True, preemption=False),
    "priority": Policy(backfill=False, preemption=False),
    "backfill": Policy(backfill=True, preemption=False),
    "preempt": Policy(preempts={"high": frozenset({"low"})}),
    "preempt-by-age": Policy(  # the oldest first, whatever its QoS
        preempts={"high": frozenset({"low", "normal"})},
        weights=PriorityWeights(age=10.0**7, max_age_s=10.0),
    ),
    "shortest-first": Policy(  # by requested GPU-time; a job pending an hour is first
        backfill=True,
        preemption=False,
        weights=PriorityWeights(shortness=10000.0, starve_after_s=3600.0),
    ),
    "limits": Policy(
        qos_limits={"normal": QosLimits(max_gpus_per_user=4)}, account_gpu_limits={"b": 6}
    ),
}


def pending(
    job_id: int, gpus: int, cpus: int, qos: str, user: str, submit: float, **kw: Any
) -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user=user,
        name=f"j{job_id}",
        partition="main",
        qos_priority=QOS[qos],
        submit_time=submit,
        gpus=gpus,
        cpus=cpus,
        mem_mb=1000 * cpus,
        qos=qos,
        account="a" if user == "u1" else "b",
        **{"time_limit_s": 600.0, **kw},
    )


def test_groups_keep_submit_order_through_requeues_and_starts() -> None:
    groups = PendingGroups()
    jobs = [pending(i, 1, 1, "normal", "u1", float(i)) for i in (1, 2, 3)]
    for j in (jobs[0], jobs[2]):
        groups.add(j)
    groups.add(jobs[1])  # a requeued job goes back to its place
    assert [j.job_id for j in groups.groups[group_of(jobs[0])].jobs] == [1, 2, 3]
    groups.remove(jobs[1])
    assert [j.job_id for j in groups.groups[group_of(jobs[0])].jobs] == [1, 3]
    held = pending(4, 1, 1, "normal", "u1", 4.0, held=True)
    assert group_of(held) == 4  # a job with a condition of its own is a group by itself
    for j in (jobs[0], jobs[2]):
        groups.remove(j)
    assert groups.groups == {}


def test_time_limit_levels_part_groups_only_where_they_order() -> None:
    short, long = (pending(i, 1, 1, "normal", "u1", float(i), time_limit_s=t)
                   for i, t in ((1, 60.0), (2, 7200.0)))  # fmt: skip
    assert group_of(short, by_limit_level=False) == group_of(long, by_limit_level=False)
    assert group_of(short) != group_of(long)
    assert orders_by_limit(POLICIES["shortest-first"]) and not orders_by_limit(POLICIES["backfill"])
    alike = tuple(
        pending(i, 1, 1, "normal", "u1", float(i), time_limit_s=(7200.0, 60.0)[i % 2])
        for i in range(1, 9)
    )  # one shape, one user: only their limits tell them apart
    for name in ("shortest-first", "backfill"):
        policy = POLICIES[name]
        groups = PendingGroups(orders_by_limit(policy))
        for job in alike:
            groups.add(job)
        snap = Snapshot(nodes=NODES, pending=alike, groups=list(groups.groups.values()))
        order, _ = queue_order(snap, 10.0, policy, with_factors=False)
        assert list(GroupedOrder(snap, 10.0, policy)) == order, name


job_specs = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 4]),  # GPUs
        st.sampled_from([1, 4]),  # CPUs
        st.sampled_from(list(QOS)),
        st.sampled_from(["u1", "u2"]),
        st.integers(0, 5),  # submit time, coarse so that ties happen
        st.booleans(),  # held
        st.sampled_from([None, 60.0, 600.0, 7200.0]),  # time limit
    ),
    min_size=1,
    max_size=40,
)
running_specs = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from([1, 2]), st.sampled_from(["low", "normal"])),
    max_size=6,
)


@settings(max_examples=500, deadline=None)
@given(
    job_specs,
    running_specs,
    st.sampled_from(list(POLICIES)),
    st.one_of(st.integers(0, 12), st.integers(0, 10**6)),
)
def test_the_grouped_walk_starts_and_preempts_what_the_full_sort_does(
    specs: list[tuple[int, int, str, str, int, bool, float | None]],
    runs: list[tuple[int, int, str]],
    policy_name: str,
    now: int,
) -> None:
    policy = POLICIES[policy_name]
    jobs = tuple(
        pending(i + 1, g, c, q, u, float(t), held=h and i % 3 == 0, time_limit_s=limit)
        for i, (g, c, q, u, t, h, limit) in enumerate(specs)
    )
    taken: dict[int, int] = {}
    running = []
    for k, (node, gpus, qos) in enumerate(runs):
        first = taken.get(node, 0)
        if first + gpus > 4:
            continue
        taken[node] = first + gpus
        running.append(
            Allocation(
                job_id=1000 + k,
                node=f"n{node}",
                user="u3",
                gpu_indices=tuple(range(first, first + gpus)),
                cpus=1,
                qos=qos,
                start_time=float(now - 3600 * k),
                time_limit_s=7200.0,
            )
        )
    groups = PendingGroups(orders_by_limit(policy))  # limit levels apart where they order
    for job in jobs:
        groups.add(job)
    plain = Snapshot(nodes=NODES, running=tuple(running), pending=jobs)
    grouped = Snapshot(
        nodes=NODES, running=tuple(running), pending=jobs, groups=list(groups.groups.values())
    )
    full = schedule(plain, now, policy)
    fast = schedule(plain, now, policy, explain=False)
    lazy = schedule(grouped, now, policy, explain=False)
    for decided in (fast, lazy):
        assert decided.starts == full.starts
        assert decided.preempts == full.preempts
        assert decided.reservations == full.reservations


def test_the_grouped_order_is_the_sorted_order() -> None:
    jobs = tuple(
        pending(i, 1 + i % 3, 1, q, u, float(i // 4))
        for i, (q, u) in enumerate(
            [(q, u) for q in QOS for u in ("u1", "u2")] * 5,
            start=1,
        )
    )
    groups = PendingGroups()
    for job in jobs:
        groups.add(job)
    for policy in (POLICIES["fifo"], POLICIES["priority"]):
        snap = Snapshot(nodes=NODES, pending=jobs, groups=list(groups.groups.values()))
        order, _ = queue_order(snap, 10.0, policy, with_factors=False)
        assert list(GroupedOrder(snap, 10.0, policy)) == order


def test_a_look_alike_that_may_preempt_is_not_dropped_with_its_group() -> None:
    # An older normal job blocks and reserves a node; a younger high job of the same
    # shape must still preempt on the other node (the groups differ by QoS).
    runs = tuple(
        Allocation(10 + i, f"n{i}", "u3", (0, 1, 2, 3), 1, qos="low", time_limit_s=7200.0)
        for i in range(2)
    )
    older = pending(1, 4, 1, "normal", "u1", 0.0)
    younger = pending(2, 4, 1, "high", "u1", 1.0)
    groups = PendingGroups()
    for job in (older, younger):
        groups.add(job)
    snap = Snapshot(
        nodes=NODES[:2],
        running=runs,
        pending=(older, younger),
        groups=list(groups.groups.values()),
    )
    decided = schedule(snap, 5.0, POLICIES["preempt-by-age"], explain=False)
    assert [r.job_id for r in decided.reservations][:1] == [1]
    assert [(p.job_id, p.for_job) for p in decided.preempts] in ([(10, 2)], [(11, 2)])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(0, 30), st.sampled_from([None, 5.0, 60.0, 600.0])),
        max_size=60,
    )
)
def test_groups_know_the_shortest_time_limit_after_each_job(
    steps: list[tuple[bool, int, float | None]],
) -> None:
    groups = PendingGroups()
    queued: dict[int, PendingJob] = {}
    for next_id, (add, submit, limit) in enumerate(steps, start=1):
        if add or not queued:
            job = pending(next_id, 1, 1, "normal", "u1", float(submit), time_limit_s=limit)
            groups.add(job)
            queued[job.job_id] = job
        else:
            groups.remove(queued.pop(sorted(queued)[submit % len(queued)]))
        for group in groups.groups.values():
            jobs = group.jobs
            assert [(j.submit_time, j.job_id) for j in jobs] == sorted(
                (j.submit_time, j.job_id) for j in jobs
            )
            limits = [j.time_limit_s if j.time_limit_s is not None else float("inf") for j in jobs]
            assert group.shortest == [min(limits[i:]) for i in range(len(jobs))]
    assert sum(len(g.jobs) for g in groups.groups.values()) == len(queued)


def test_a_job_requeued_after_a_failure_goes_first_in_every_order() -> None:
    """Expedited requeue: the job that failed restarts before the queue takes its room,
    whatever its priority, in FIFO and in priority order, walked whole or by groups,
    and a pass starts it first."""
    jobs = tuple(pending(i, 2, 1, "high" if i < 5 else "low", "u1", float(i)) for i in range(1, 9))
    failed = pending(9, 2, 1, "low", "u1", 9.0, expedite=True)
    queue = (*jobs, failed)
    assert group_of(failed) == 9  # a group by itself
    groups = PendingGroups()
    for job in queue:
        groups.add(job)
    for name in ("fifo", "priority", "backfill", "shortest-first"):
        snap = Snapshot(nodes=NODES, pending=queue, groups=list(groups.groups.values()))
        for with_factors in (True, False):
            order, _ = queue_order(snap, 10.0, POLICIES[name], with_factors=with_factors)
            assert order[0].job_id == 9, name
            assert [j.job_id for j in order[1:]] == [
                j.job_id for j in queue_order(Snapshot(nodes=NODES, pending=jobs), 10.0,
                                              POLICIES[name], with_factors)[0]
            ], name  # fmt: skip
        assert next(iter(GroupedOrder(snap, 10.0, POLICIES[name]))).job_id == 9, name
    one_node = NODES[:1]  # room for two of these jobs: the failed one is among them
    busy = (Allocation(100, "n0", "u2", (0, 1), 1, 1000, 0.0, qos="low"),)
    started = schedule(Snapshot(nodes=one_node, pending=queue, running=busy), 10.0,
                       POLICIES["backfill"])  # fmt: skip
    assert [s.job_id for s in started.starts] == [9]


def test_an_expedited_job_does_not_go_before_a_job_that_may_preempt_it() -> None:
    """It would restart only to be preempted again: behind a pending job whose QoS may
    preempt its own, it keeps its priority's place (ahead of the rest)."""
    failed = pending(9, 2, 1, "low", "u1", 9.0, expedite=True)
    urgent = pending(1, 2, 1, "high", "u2", 1.0)
    other = pending(2, 2, 1, "normal", "u2", 2.0)
    policy = POLICIES["preempt"]  # high may preempt low
    order, _ = queue_order(Snapshot(nodes=NODES, pending=(urgent, other, failed)), 10.0, policy)
    assert [j.job_id for j in order] == [1, 2, 9]  # by priority, not expedited
    calm, _ = queue_order(Snapshot(nodes=NODES, pending=(other, failed)), 10.0, policy)
    assert [j.job_id for j in calm] == [9, 2]
