"""MIG slices in the scheduler: given only to jobs that name their profile; a job
that names no type gets whole GPUs."""

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
