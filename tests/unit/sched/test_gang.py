"""Multi-node gang jobs: all nodes at once or none, reservations across nodes."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.model import Policy

NODES = tuple(
    NodeView(f"n{i}", cpus=8, memory_mb=16000, gpus=tuple(GpuSlot(g, "h100") for g in range(4)))
    for i in range(3)
)
TRACES = Path(__file__).resolve().parents[1] / "sim" / "data"  # Tiresias' public trace


def gang(job_id: int, nodes: int, gpus: int, **kw: object) -> PendingJob:
    return PendingJob(
        job_id=job_id,
        user="u",
        name=f"j{job_id}",
        partition="main",
        qos_priority=0,
        submit_time=float(job_id),
        gpus=gpus,
        nodes=nodes,
        **kw,
    )  # type: ignore[arg-type]


def busy(job_id: int, node: str, gpus: tuple[int, ...], end: float) -> Allocation:
    return Allocation(job_id, node, "v", gpus, start_time=0.0, time_limit_s=end)


def test_a_gang_job_starts_on_all_its_nodes_at_once() -> None:
    d = schedule(Snapshot(nodes=NODES, pending=(gang(1, 2, 4),)), now=0)
    (start,) = d.starts
    assert len(start.placements) == 2
    assert len({node for node, _ in start.placements}) == 2
    assert all(gpus == (0, 1, 2, 3) for _, gpus in start.placements)


def test_a_gang_job_waits_when_only_some_nodes_are_free() -> None:
    running = (busy(9, "n0", (0,), 100.0), busy(8, "n1", (0,), 200.0))
    d = schedule(Snapshot(nodes=NODES, running=running, pending=(gang(1, 2, 4),)), now=0)
    assert d.starts == () and d.reasons == {1: "Resources"}
    # Reserved where it starts soonest: n2 (free now) and n0 (free at 100).
    (reservation,) = d.reservations
    assert reservation.start_time == 100.0


def test_backfill_never_delays_a_reserved_gang_job() -> None:
    running = (busy(9, "n0", (0,), 100.0), busy(8, "n1", (0,), 200.0))
    long = gang(2, 1, 4, time_limit_s=500.0)  # would hold n2 past the reservation
    short = gang(3, 1, 3, time_limit_s=50.0)  # ends before it: may start
    d = schedule(
        Snapshot(nodes=NODES, running=running, pending=(gang(1, 2, 4), long, short)), now=0
    )
    started = {s.job_id for s in d.starts}
    assert 2 not in started and 3 in started


def test_a_gang_job_too_wide_for_the_partition_says_so() -> None:
    d = schedule(Snapshot(nodes=NODES, pending=(gang(1, 4, 4),)), now=0)
    assert d.reasons == {1: "ReqNodeNotAvail"}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3), st.integers(0, 4), st.integers(1, 8)), min_size=1, max_size=8
    )
)
def test_gangs_never_oversubscribe_a_node(shapes: list[tuple[int, int, int]]) -> None:
    pending = tuple(
        gang(i + 1, n, g, cpus=c, time_limit_s=10.0) for i, (n, g, c) in enumerate(shapes)
    )
    d = schedule(Snapshot(nodes=NODES, pending=pending), 0, Policy())
    used: dict[str, list[int]] = {}
    cpus: dict[str, int] = {}
    for s in d.starts:
        job = next(p for p in pending if p.job_id == s.job_id)
        assert len(s.placements) == job.nodes
        assert len({n for n, _ in s.placements}) == job.nodes
        for node, gpus in s.placements:
            assert len(gpus) == job.gpus
            used.setdefault(node, []).extend(gpus)
            cpus[node] = cpus.get(node, 0) + job.cpus
    for node, gpus in used.items():
        assert len(gpus) == len(set(gpus)) <= 4
        assert cpus[node] <= 8


def test_the_tiresias_trace_replays_every_job_on_4_gpu_nodes() -> None:
    from podium.sim.engine import SimOptions, simulate, uniform_nodes
    from podium.sim.traces import read_tiresias

    jobs = read_tiresias(TRACES / "tiresias_60_job.csv")
    assert any(j.gpus > 4 for j in jobs)  # 8-GPU jobs: two nodes each
    result = simulate(jobs, uniform_nodes(4, 4, 64, 512000), "backfill", SimOptions())
    assert result.unschedulable == []
    assert sum(o.end is not None for o in result.outcomes) == 60
