from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.jobspec.job import Dependency
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule

NODE = NodeView("n0", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(i, "h100") for i in range(4)))


def job(
    job_id: int, gpus: int = 0, qos: int = 100, submit: float = 0.0, **kw: object
) -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user=str(kw.pop("user", "u")),
        name=str(kw.pop("name", f"j{job_id}")),
        partition="main",
        qos_priority=qos,
        submit_time=submit or job_id,
        gpus=gpus,
        **kw,
    )  # type: ignore[arg-type]


def test_seed_scenario_b_and_a_start_c_waits() -> None:
    a, b, c = job(1, 2, qos=100), job(2, 2, qos=1000), job(3, 1, qos=10)
    d = schedule(Snapshot(nodes=(NODE,), pending=(a, b, c)), now=10)
    assert [s.job_id for s in d.starts] == [2, 1]
    assert d.starts[0].gpu_indices == (0, 1) and d.starts[1].gpu_indices == (2, 3)
    assert d.reasons == {3: "Resources"}


def test_strict_priority_blocks_lower_jobs() -> None:
    running = Allocation(job_id=9, node="n0", user="u", gpu_indices=(0, 1, 2), cpus=1)
    big, small = job(1, 2, qos=1000), job(2, 1, qos=10)
    d = schedule(Snapshot(nodes=(NODE,), running=(running,), pending=(big, small)), now=0)
    assert d.starts == () and d.reasons == {1: "Resources", 2: "Priority"}


def test_cpu_and_memory_are_gang_allocated_too() -> None:
    d = schedule(Snapshot(nodes=(NODE,), pending=(job(1, cpus=6), job(2, cpus=3))), now=0)
    assert [s.job_id for s in d.starts] == [1] and d.reasons[2] == "Resources"
    d = schedule(Snapshot(nodes=(NODE,), pending=(job(1, mem_mb=16001),)), now=0)
    assert d.reasons[1] == "ReqNodeNotAvail"


def test_gpu_type_and_drained_node() -> None:
    d = schedule(Snapshot(nodes=(NODE,), pending=(job(1, 1, gpu_type="a100"),)), now=0)
    assert d.starts == () and d.reasons[1] == "ReqNodeNotAvail"
    drained = NodeView("n0", 8, 16000, NODE.gpus, schedulable=False)
    d = schedule(Snapshot(nodes=(drained,), pending=(job(1, 1),)), now=0)
    assert d.reasons[1] == "ReqNodeNotAvail"


def test_exclusive_jobs() -> None:
    busy = Allocation(job_id=9, node="n0", user="bob", cpus=1)
    d = schedule(Snapshot(nodes=(NODE,), running=(busy,), pending=(job(1, exclusive="node"),)), 0)
    assert d.reasons[1] == "Resources"
    excl = Allocation(job_id=9, node="n0", user="bob", cpus=1, exclusive="user")
    d = schedule(
        Snapshot(nodes=(NODE,), running=(excl,), pending=(job(1, user="amy"), job(2, user="bob"))),
        0,
    )
    assert [s.job_id for s in d.starts] == [] and d.reasons[1] == "Resources"
    d = schedule(Snapshot(nodes=(NODE,), running=(excl,), pending=(job(2, user="bob"),)), 0)
    assert [s.job_id for s in d.starts] == [2]


def test_held_begin_time_dependencies_and_throttle() -> None:
    pending = (
        job(1, held=True),
        job(2, begin_time=100.0),
        job(3, dependencies=(Dependency(kind="afterok", job_ids=(50,)),)),
        job(4, dependencies=(Dependency(kind="afterok", job_ids=(51,)),), kill_on_invalid_dep=True),
        job(5, dependencies=(Dependency(kind="afternotok", job_ids=(51,)),)),
        job(6, array_job_id=6, array_throttle=1),
        job(7, array_job_id=6, array_throttle=1),
    )
    d = schedule(
        Snapshot(nodes=(NODE,), pending=pending, job_states={50: "RUNNING", 51: "FAILED"}), now=10
    )
    assert d.reasons[1] == "JobHeldUser" and d.reasons[2] == "BeginTime"
    assert d.reasons[3] == "Dependency" and d.reasons[4] == "DependencyNeverSatisfied"
    assert d.cancels == {4: "DependencyNeverSatisfied"}
    assert {s.job_id for s in d.starts} == {5, 6} and d.reasons[7] == "JobArrayTaskLimit"


def test_a_pending_array_starts_as_many_tasks_as_fit_and_its_throttle_allows() -> None:
    array = job(6, gpus=1, array_job_id=6, count=7)  # 7 tasks of one GPU, 4 GPUs free
    later = job(9, gpus=1)
    d = schedule(Snapshot(nodes=(NODE,), pending=(array, later)), now=10)
    assert [s.job_id for s in d.starts] == [6, 6, 6, 6]
    assert sorted(g for s in d.starts for g in s.gpu_indices) == [0, 1, 2, 3]
    assert d.reasons == {6: "Resources", 9: "Priority"}  # the three left wait as one
    throttled = job(6, gpus=1, array_job_id=6, array_throttle=3, count=7)
    running = Allocation(job_id=5, node="n0", user="u", array_job_id=6)  # one task runs
    d = schedule(Snapshot(nodes=(NODE,), running=(running,), pending=(throttled,)), now=10)
    assert [s.job_id for s in d.starts] == [6, 6] and d.reasons[6] == "JobArrayTaskLimit"
    few = job(6, gpus=1, array_job_id=6, count=2)
    d = schedule(Snapshot(nodes=(NODE,), pending=(few,)), now=10)
    assert [s.job_id for s in d.starts] == [6, 6] and 6 not in d.reasons


def test_any_dependency_and_arrays_as_a_whole() -> None:
    dep = (Dependency(kind="afterok", job_ids=(10,)),)
    snap = Snapshot(
        nodes=(NODE,),
        pending=(job(1, dependencies=dep),),
        job_states={11: "COMPLETED", 12: "RUNNING"},
        array_members={10: (11, 12)},
    )
    assert schedule(snap, 0).reasons[1] == "Dependency"
    any_dep = (Dependency(kind="afterok", job_ids=(11,)), Dependency(kind="afterok", job_ids=(12,)))
    snap = Snapshot(
        nodes=(NODE,),
        pending=(job(1, dependencies=any_dep, dependency_any=True),),
        job_states={11: "COMPLETED", 12: "RUNNING"},
    )
    assert [s.job_id for s in schedule(snap, 0).starts] == [1]


def test_singleton_one_at_a_time() -> None:
    single = (Dependency(kind="singleton"),)
    running = Allocation(job_id=9, node="n0", user="u", name="train")
    snap = Snapshot(
        nodes=(NODE,), running=(running,), pending=(job(1, name="train", dependencies=single),)
    )
    assert schedule(snap, 0).reasons[1] == "Dependency"
    snap = Snapshot(
        nodes=(NODE,),
        pending=(job(1, name="t", dependencies=single), job(2, name="t", dependencies=single)),
    )
    d = schedule(snap, 0)
    assert [s.job_id for s in d.starts] == [1] and d.reasons[2] == "Dependency"


jobs_strategy = st.lists(
    st.tuples(
        st.integers(0, 4),
        st.integers(1, 8),
        st.integers(0, 16000),
        st.sampled_from([10, 100, 1000]),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(jobs_strategy, st.lists(st.integers(0, 3), max_size=4, unique=True))
def test_never_oversubscribes_and_allocates_whole_jobs(
    specs: list[tuple[int, int, int, int]], busy_gpus: list[int]
) -> None:
    running = (
        Allocation(
            job_id=999, node="n0", user="x", gpu_indices=tuple(busy_gpus), cpus=1, mem_mb=1000
        ),
    )
    pending = tuple(job(i + 1, g, qos=q, cpus=c, mem_mb=m) for i, (g, c, m, q) in enumerate(specs))
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=pending), now=0)
    by_id = {p.job_id: p for p in pending}
    gpus = [g for s in d.starts for g in s.gpu_indices] + busy_gpus
    assert len(gpus) == len(set(gpus)) and all(0 <= g < 4 for g in gpus)
    assert sum(s.cpus for s in d.starts) + 1 <= NODE.cpus
    assert sum(s.mem_mb for s in d.starts) + 1000 <= NODE.memory_mb
    for s in d.starts:
        assert len(s.gpu_indices) == by_id[s.job_id].gpus
        assert s.cpus == by_id[s.job_id].cpus and s.mem_mb == by_id[s.job_id].mem_mb
    started = {s.job_id for s in d.starts}
    assert started | set(d.reasons) == set(by_id) and not started & set(d.reasons)


def test_a_requeued_job_avoids_its_faulty_gpu_and_others_do_not() -> None:
    running = Allocation(job_id=9, node="n0", user="u", gpu_indices=(2, 3), cpus=1)
    shy = job(1, 2, avoid_gpus=frozenset({("n0", 1)}))
    d = schedule(Snapshot(nodes=(NODE,), running=(running,), pending=(shy,)), now=0)
    assert d.starts == () and d.reasons[1] == "Resources"
    d = schedule(Snapshot(nodes=(NODE,), running=(running,), pending=(job(2, 2),)), now=0)
    assert d.starts[0].gpu_indices == (0, 1)  # the same shape without the exclusion fits
    d = schedule(Snapshot(nodes=(NODE,), pending=(shy,)), now=0)
    assert 1 not in d.starts[0].gpu_indices
    # Its reservation counts only GPUs it may use: GPUs 2 and 3 free up at t=100.
    limited = Allocation(9, "n0", "u", gpu_indices=(2, 3), cpus=1, time_limit_s=100)
    d = schedule(Snapshot(nodes=(NODE,), running=(limited,), pending=(shy,)), now=0)
    assert [(r.job_id, r.start_time) for r in d.reservations] == [(1, 100)]
