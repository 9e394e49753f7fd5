"""Parts of GPUs in the scheduler: MIG slices go only to jobs that name their
profile (a job that names no type gets whole GPUs); an MPS share comes from one GPU,
never shared with another user's MPS jobs."""

from __future__ import annotations

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule

# GPU 0 split as 3g.40gb + 2g.20gb + 2 x 1g.10gb (slices 2-5); GPU 1 whole.
NODE = NodeView(
    "n0",
    cpus=16,
    memory_mb=64000,
    gpus=(
        GpuSlot(1, "h100"),
        GpuSlot(2, "2g.20gb", whole=False),
        GpuSlot(3, "1g.10gb", whole=False),
        GpuSlot(4, "1g.10gb", whole=False),
        GpuSlot(5, "3g.40gb", whole=False),
    ),
)


def job(job_id: int, gpus: int, gpu_type: str | None = None, user: str = "u") -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user=user,
        name=f"j{job_id}",
        partition="main",
        qos_priority=0,
        submit_time=float(job_id),
        gpus=gpus,
        gpu_type=gpu_type,
        time_limit_s=100.0,
    )


def starts(
    *pending: PendingJob, running: tuple[Allocation, ...] = ()
) -> dict[int, tuple[int, ...]]:
    d = schedule(Snapshot(nodes=(NODE,), running=running, pending=pending), now=0)
    return {s.job_id: s.gpu_indices for s in d.starts}


def test_slices_go_to_jobs_naming_their_profile_and_untyped_jobs_get_whole_gpus() -> None:
    got = starts(
        job(1, 1, "1g.10gb"), job(2, 1, "1g.10gb", user="v"), job(3, 1), job(4, 1, "3g.40gb")
    )
    assert got == {1: (3,), 2: (4,), 3: (1,), 4: (5,)}


def test_an_untyped_job_never_gets_a_slice() -> None:
    got = starts(job(1, 1), job(2, 1))  # one whole GPU: the second waits
    assert got == {1: (1,)}
    d = schedule(Snapshot(nodes=(NODE,), pending=(job(3, 2),)), now=0)
    assert d.starts == () and d.reasons[3] != "Resources"  # two whole GPUs: never here


def test_a_third_small_slice_waits_for_one_to_free() -> None:
    running = (Allocation(9, "n0", "v", (3,), start_time=0.0, time_limit_s=50.0),)
    got = starts(job(1, 1, "1g.10gb"), job(2, 1, "1g.10gb"), running=running)
    assert got == {1: (4,)}


# GPU 0 shared by MPS (units 10-19, ten of 10 % each), GPU 1 by MPS too (units 20-29).
MPS_NODE = NodeView(
    "n0",
    cpus=16,
    memory_mb=64000,
    gpus=tuple(GpuSlot(i, "mps", whole=False, parent=0) for i in range(10, 20))
    + tuple(GpuSlot(i, "mps", whole=False, parent=1) for i in range(20, 30)),
)


def mps_starts(
    *pending: PendingJob, running: tuple[Allocation, ...] = ()
) -> dict[int, tuple[int, ...]]:
    d = schedule(Snapshot(nodes=(MPS_NODE,), running=running, pending=pending), now=0)
    return {s.job_id: s.gpu_indices for s in d.starts}


def test_an_mps_share_comes_from_one_gpu() -> None:
    running = (Allocation(9, "n0", "u", tuple(range(10, 16)), start_time=0.0, time_limit_s=50.0),)
    got = mps_starts(job(1, 5, "mps"), job(2, 4, "mps"), running=running)
    # 4 units left on GPU 0, 10 on GPU 1: the 5-unit share goes whole to GPU 1, the
    # 4-unit one fills GPU 0 (fewest free units that fit).
    assert got == {1: (20, 21, 22, 23, 24), 2: (16, 17, 18, 19)}


def test_two_users_never_share_a_gpu_under_mps() -> None:
    running = (Allocation(9, "n0", "u", (10, 11), start_time=0.0, time_limit_s=50.0),)
    got = mps_starts(job(1, 3, "mps", user="v"), job(2, 3, "mps", user="u"), running=running)
    assert got[1] == (20, 21, 22) and got[2] == (12, 13, 14)
    busy = (*running, Allocation(8, "n0", "w", (20,), start_time=0.0, time_limit_s=50.0))
    assert mps_starts(job(3, 1, "mps", user="v"), running=busy) == {}


def test_an_mps_share_never_preempts() -> None:
    from podium.sched.model import Policy

    policy = Policy(preempts={"high": frozenset({"low"})})
    low = Allocation(9, "n0", "u", tuple(range(10, 20)), qos="low", start_time=0.0)
    high = PendingJob(1, "v", "j1", "main", 0, 1.0, gpus=5, gpu_type="mps", qos="high")
    only_gpu0 = NodeView("n0", 16, 64000, MPS_NODE.gpus[:10])
    d = schedule(Snapshot(nodes=(only_gpu0,), running=(low,), pending=(high,)), 10.0, policy)
    assert d.preempts == () and d.starts == ()
