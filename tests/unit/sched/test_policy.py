"""Backfill, reservations, preemption, limits and priority: the pure core."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.api.usage import decay
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.fairshare import Association, fairshare_table, user_factors
from podium.sched.model import Policy, QosLimits
from podium.sched.priority import PriorityWeights, factors

NODE = NodeView("n0", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(i, "h100") for i in range(4)))


def job(
    job_id: int,
    gpus: int = 0,
    limit: float | None = 100.0,
    qos: str = "normal",
    qos_priority: int = 100,
    submit: float | None = None,
    **kw: object,
) -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user=str(kw.pop("user", "u")),
        name=f"j{job_id}",
        partition="main",
        qos_priority=qos_priority,
        submit_time=submit if submit is not None else job_id,
        gpus=gpus,
        time_limit_s=limit,
        qos=qos,
        account=str(kw.pop("account", "acct")),
        **kw,
    )  # type: ignore[arg-type]


def running(
    job_id: int,
    gpus: tuple[int, ...],
    start: float,
    limit: float | None,
    qos: str = "normal",
    user: str = "u",
) -> Allocation:
    return Allocation(
        job_id=job_id,
        node="n0",
        user=user,
        gpu_indices=gpus,
        cpus=1,
        qos=qos,
        start_time=start,
        time_limit_s=limit,
        account="acct",
    )


def test_backfill_fills_gaps_without_delaying_the_reservation() -> None:
    # 3 GPUs busy until t=100; the big job needs all 4 -> reserved for t=100.
    busy = running(9, (0, 1, 2), start=0, limit=100)
    big = job(1, 4, limit=50, qos_priority=1000)
    short = job(2, 1, limit=50)  # ends at 60 <= 100: may backfill
    long = job(3, 1, limit=500)  # would still hold a GPU at t=100: may not
    d = schedule(Snapshot(nodes=(NODE,), running=(busy,), pending=(big, short, long)), now=10)
    assert [s.job_id for s in d.starts] == [2]
    assert d.reasons[1] == "Resources" and d.reasons[3] == "Priority"
    assert [(r.job_id, r.start_time) for r in d.reservations] == [(1, 100)]


def test_without_backfill_lower_jobs_wait() -> None:
    busy = running(9, (0, 1, 2), start=0, limit=100)
    pending = (job(1, 4, qos_priority=1000), job(2, 1, limit=5))
    d = schedule(
        Snapshot(nodes=(NODE,), running=(busy,), pending=pending),
        now=10,
        policy=Policy(backfill=False),
    )
    assert d.starts == () and d.reasons == {1: "Resources", 2: "Priority"}


def test_backfill_may_use_room_the_reservation_leaves() -> None:
    # GPUs 0-2 are busy until t=100 and GPU 3 is free now.
    busy = running(9, (0, 1, 2), start=0, limit=100)
    long = job(2, 1, limit=10_000)  # would still run at t=100
    d = schedule(
        Snapshot(nodes=(NODE,), running=(busy,), pending=(job(1, 4, qos_priority=1000), long)),
        now=10,
    )
    assert d.starts == ()  # the 4-GPU job needs GPU 3 at t=100
    d = schedule(
        Snapshot(nodes=(NODE,), running=(busy,), pending=(job(1, 2, qos_priority=1000), long)),
        now=10,
    )
    assert [s.job_id for s in d.starts] == [2]  # a 2-GPU job leaves GPU 3 spare at t=100


def test_big_job_is_not_starved_by_a_stream_of_small_ones() -> None:
    """Simulate: a 4-GPU job waits behind an endless stream of 1-GPU jobs."""
    now, next_id = 0.0, 100
    allocs: list[Allocation] = [running(i, (i,), start=0, limit=30 + 10 * i) for i in range(4)]
    big = job(1, 4, limit=50, qos_priority=100, submit=0)  # same QoS, first in line
    reserved_at: float | None = None
    for _ in range(200):
        allocs = [a for a in allocs if a.end_estimate > now]
        stream = tuple(
            job(next_id + k, 1, limit=40, qos_priority=100, submit=now) for k in range(4)
        )
        d = schedule(Snapshot(nodes=(NODE,), running=tuple(allocs), pending=(big, *stream)), now)
        if reserved_at is None and d.reservations:
            reserved_at = d.reservations[0].start_time
        started = {s.job_id: s for s in d.starts}
        if 1 in started:
            assert reserved_at is not None and now <= reserved_at
            return
        for s in d.starts:
            allocs.append(
                Allocation(
                    job_id=s.job_id,
                    node="n0",
                    user="u",
                    gpu_indices=s.gpu_indices,
                    cpus=1,
                    start_time=now,
                    time_limit_s=40,
                    qos="normal",
                )
            )
        next_id += 4
        now += 5
    raise AssertionError("the big job never started")


def test_preemption_picks_the_least_work_lost_and_respects_exempt_time() -> None:
    allocs = (
        running(10, (0, 1), start=0, limit=None, qos="low"),  # 2 GPUs x 100 s = 200
        running(11, (2,), start=90, limit=None, qos="low"),  # 1 GPU x 10 s = 10
        running(12, (3,), start=95, limit=None, qos="normal"),  # not preemptable by high
    )
    urgent = job(1, 1, qos="high", qos_priority=1000)
    policy = Policy(preempts={"high": frozenset({"low"})})
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=(urgent,)), now=100, policy=policy)
    assert [(p.job_id, p.for_job, p.mode) for p in d.preempts] == [(11, 1, "requeue")]
    assert d.starts == ()
    exempt = Policy(
        preempts={"high": frozenset({"low"})}, preempt_exempt_s=30, preempt_mode={"low": "cancel"}
    )
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=(urgent,)), now=100, policy=exempt)
    assert [(p.job_id, p.mode) for p in d.preempts] == [(10, "cancel")]
    # Once a victim is being stopped, no second one is chosen for the same job.
    stopping = (allocs[0], Allocation(**{**allocs[1].__dict__, "preempting": True}), allocs[2])
    d = schedule(
        Snapshot(nodes=(NODE,), running=stopping, pending=(urgent,)), now=101, policy=policy
    )
    assert d.preempts == ()


def test_limits_name_the_limit() -> None:
    allocs = (running(9, (0,), start=0, limit=None, user="amy"),)
    policy = Policy(
        qos_limits={"normal": QosLimits(max_gpus_per_user=2, max_jobs_per_user=5)},
        account_gpu_limits={"small": 1},
    )
    pending = (job(1, 2, user="amy"), job(2, 1, user="amy"), job(3, 2, user="bob", account="small"))
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=pending), now=0, policy=policy)
    assert d.reasons[1] == "QOSMaxGRESPerUser" and d.reasons[3] == "AssocGrpGRES"
    assert [s.job_id for s in d.starts] == [2]
    one = Policy(qos_limits={"normal": QosLimits(max_jobs_per_user=1)})
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=(job(2, 1, user="amy"),)), 0, one)
    assert d.reasons[2] == "QOSMaxJobsPerUserLimit"


def test_priority_factors_and_fairshare_order() -> None:
    w = PriorityWeights(age=1000, fairshare=10000, qos=0, jobsize=0, partition=0, max_age_s=100)
    f = factors(
        weights=w,
        now=50,
        submit_time=0,
        fairshare=0.25,
        qos_priority=0,
        max_qos_priority=0,
        gpus=0,
        cluster_gpus=4,
        partition_tier=0,
        max_partition_tier=0,
        nice=10,
    )
    assert f.age == 0.5 and f.total == 500 + 2500 - 10
    pending = (job(1, 4, account="heavy", user="h"), job(2, 4, account="light", user="l"))
    snap = Snapshot(
        nodes=(NODE,), pending=pending, fairshare={("heavy", "h"): 0.1, ("light", "l"): 0.9}
    )
    d = schedule(snap, now=0, policy=Policy(weights=w))
    assert [s.job_id for s in d.starts] == [2]
    assert d.priorities[2].total > d.priorities[1].total
    fifo = schedule(snap, now=0, policy=Policy(weights=w, use_priority=False))
    assert [s.job_id for s in fifo.starts] == [1]


def test_fairshare_classic_formula() -> None:
    root = Association(
        "root",
        children=(
            Association(
                "a",
                2,
                children=(Association("u1", 1, is_user=True), Association("u2", 1, is_user=True)),
            ),
            Association("b", 1, children=(Association("u3", 1, is_user=True),)),
        ),
    )
    assert set(user_factors(root, {}).values()) == {1.0}
    table = {
        (r.account, r.user): r
        for r in fairshare_table(root, {("a", "u1"): 100.0, ("b", "u3"): 100.0})
    }
    assert abs(table[("a", None)].norm_shares - 2 / 3) < 1e-9
    # b used half with a third of the shares: lower than a (half with two thirds).
    assert table[("b", None)].fairshare < table[("a", None)].fairshare
    # u2 used nothing: highest; u1 and u3 used the same share of the same size.
    assert table[("a", "u2")].fairshare > table[("a", "u1")].fairshare
    assert abs(table[("a", "u1")].fairshare - table[("b", "u3")].fairshare) < 1e-9
    assert decay(100.0, 3600, 3600) == 50.0 and decay(100.0, 0, 3600) == 100.0


NODES = tuple(
    NodeView(f"n{i}", cpus=16, memory_mb=64000, gpus=tuple(GpuSlot(g, "h100") for g in range(8)))
    for i in range(3)
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 8), st.integers(1, 400), st.sampled_from([10, 100, 1000])),
        min_size=1,
        max_size=30,
    ),
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 8), st.integers(1, 300)), max_size=6),
)
def test_backfill_never_oversubscribes_nor_delays_the_reservation(
    specs: list[tuple[int, int, int]], busy: list[tuple[int, int, int]]
) -> None:
    allocs, used = [], {n.name: 0 for n in NODES}
    for k, (node_i, gpus, limit) in enumerate(busy):
        name = NODES[node_i].name
        take = min(gpus, 8 - used[name])
        if take:
            allocs.append(
                Allocation(
                    job_id=1000 + k,
                    node=name,
                    user="x",
                    gpu_indices=tuple(range(used[name], used[name] + take)),
                    cpus=1,
                    start_time=0,
                    time_limit_s=limit,
                )
            )
            used[name] += take
    pending = tuple(job(i + 1, g, limit=lim, qos_priority=q) for i, (g, lim, q) in enumerate(specs))
    d = schedule(Snapshot(nodes=NODES, running=tuple(allocs), pending=pending), now=0)
    per_node: dict[str, list[int]] = {n.name: [] for n in NODES}
    for a in allocs:
        per_node[a.node].extend(a.gpu_indices)
    for s in d.starts:
        per_node[s.node].extend(s.gpu_indices)
    for gpus in per_node.values():
        assert len(gpus) == len(set(gpus)) and all(0 <= g < 8 for g in gpus)
    # The reserved job must still fit at its reserved time, given what started now.
    limits = {p.job_id: p.time_limit_s for p in pending}
    for r in d.reservations:
        need = next(p.gpus for p in pending if p.job_id == r.job_id)
        held_then = sum(
            len(a.gpu_indices) for a in allocs if a.node == r.node and a.end_estimate > r.start_time
        )
        held_then += sum(
            len(s.gpu_indices)
            for s in d.starts
            if s.node == r.node and (limits[s.job_id] or 1e18) > r.start_time
        )
        assert 8 - held_then >= need


def test_gpus_close_together_when_topology_is_known() -> None:
    from podium.sched.fit import pick_gpus

    groups = ((0, 1, 2, 3), (4, 5, 6, 7))
    assert pick_gpus([0, 1, 2, 3, 4, 5, 6, 7], 2, groups) == (0, 1)
    # The group with the fewest spare GPUs that still fits: keep the whole one whole.
    assert pick_gpus([3, 4, 5, 6, 7], 1, groups) == (3,)
    assert pick_gpus([2, 3, 4, 5, 6, 7], 2, groups) == (2, 3)
    assert pick_gpus([1, 2, 4, 5, 6], 3, groups) == (4, 5, 6)
    # No group fits: fewest groups, largest first.
    assert pick_gpus([1, 2, 4, 5, 6], 4, groups) == (1, 4, 5, 6)
    assert pick_gpus([5, 1, 3], 2, ()) == (1, 3)
    node = NodeView("n", 8, 1000, tuple(GpuSlot(i, "h100") for i in range(8)), gpu_groups=groups)
    busy = Allocation(job_id=9, node="n", user="u", gpu_indices=(0, 4), cpus=1)
    d = schedule(Snapshot(nodes=(node,), running=(busy,), pending=(job(1, 3),)), now=0)
    assert d.starts[0].gpu_indices == (1, 2, 3)


def test_preemption_loses_the_least_work_since_the_last_checkpoint() -> None:
    """Job 10 ran longest but checkpointed a second ago: stopping it loses 2 GPU-seconds,
    stopping job 11 (no checkpoint) 10. Runtime alone would pick 11."""
    allocs = (
        running(10, (0, 1), start=0, limit=None, qos="low"),
        running(11, (2,), start=90, limit=None, qos="low"),
        running(12, (3,), start=95, limit=None, qos="normal"),
    )
    fresh = (Allocation(**{**allocs[0].__dict__, "checkpoint_time": 99.0}), *allocs[1:])
    urgent = job(1, 2, qos="high", qos_priority=1000)
    policy = Policy(preempts={"high": frozenset({"low"})})
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=(urgent,)), now=100, policy=policy)
    assert [p.job_id for p in d.preempts] == [10]  # 11 alone frees 1 GPU: not enough
    one = job(2, 1, qos="high", qos_priority=1000)
    d = schedule(Snapshot(nodes=(NODE,), running=fresh, pending=(one,)), now=100, policy=policy)
    assert [p.job_id for p in d.preempts] == [10]
    d = schedule(Snapshot(nodes=(NODE,), running=allocs, pending=(one,)), now=100, policy=policy)
    assert [p.job_id for p in d.preempts] == [11]
    assert fresh[0].lost_work(100) == 2.0 and allocs[0].lost_work(100) == 200.0
    stale = Allocation(**{**allocs[1].__dict__, "checkpoint_time": 50.0})  # before its start
    assert stale.lost_work(100) == 10.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 100), st.one_of(st.none(), st.integers(0, 100))),
        min_size=8,
        max_size=8,
    ),
    st.integers(1, 8),
)
def test_the_victims_lose_no_more_than_any_other_set_that_frees_enough(
    runs: list[tuple[int, int | None]], wanted: int
) -> None:
    """Eight 1-GPU low-QoS jobs (start, checkpoint) on an 8-GPU node: the victims of a
    `wanted`-GPU high-QoS job free exactly enough and lose the least work of any set
    that does (checked against every set of that size: each frees one GPU)."""
    node = NodeView(
        "n0", cpus=64, memory_mb=64000, gpus=tuple(GpuSlot(i, "h100") for i in range(8))
    )
    now = 200.0
    allocs = tuple(
        Allocation(**{**running(10 + i, (i,), start=float(s), limit=None, qos="low").__dict__,
                      "checkpoint_time": None if c is None else float(c)})
        for i, (s, c) in enumerate(runs)
    )  # fmt: skip
    urgent = job(1, wanted, qos="high", qos_priority=1000)
    policy = Policy(preempts={"high": frozenset({"low"})})
    d = schedule(Snapshot(nodes=(node,), running=allocs, pending=(urgent,)), now=now, policy=policy)
    chosen = {p.job_id for p in d.preempts}
    assert len(chosen) == wanted
    lost = sum(a.lost_work(now) for a in allocs if a.job_id in chosen)
    cheapest = sum(sorted(a.lost_work(now) for a in allocs)[:wanted])
    assert lost == pytest.approx(cheapest)


def test_shortest_first_orders_by_requested_gpu_time_and_guards_against_starvation() -> None:
    from podium.sched.order import queue_order
    from podium.sched.priority import limit_level, shortness_of

    w = PriorityWeights(fairshare=0.0, shortness=10000.0, starve_after_s=3600.0)
    policy = Policy(backfill=True, preemption=False, weights=w)
    node = NodeView(
        "n0", cpus=64, memory_mb=64000, gpus=tuple(GpuSlot(i, "h100") for i in range(8))
    )

    def job(job_id: int, gpus: int, limit: float, submit: float) -> PendingJob:
        return PendingJob(job_id, "u", f"j{job_id}", "main", 100, submit, gpus=gpus,
                          time_limit_s=limit)  # fmt: skip

    long_big, short_small, short_big = (
        job(1, 4, 36000, 0.0),
        job(2, 1, 600, 50.0),
        job(3, 4, 600, 60.0),
    )
    snap = Snapshot(nodes=(node,), pending=(long_big, short_small, short_big))
    order, factors = queue_order(snap, 100.0, policy)
    assert [j.job_id for j in order] == [2, 3, 1]  # least GPU-time first, whatever the order
    assert factors[2].shortness > factors[3].shortness > factors[1].shortness
    order, _ = queue_order(snap, 3700.0, policy)  # job 1 has waited an hour: it goes first
    assert order[0].job_id == 1
    assert limit_level(600) == limit_level(1000) == 512 and limit_level(None) == 0
    assert shortness_of(1, None, 0.0, None) == 0.0  # no limit: never counted short
