"""End-aware placement (`Policy.placement: end-aware`, podium.sched.fit.Index): best fit
by free GPUs, and among nodes with as many free, the one whose jobs end last."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.fit import Index, Node
from podium.sched.model import Policy

NODES = tuple(
    NodeView(f"n{i}", 16, 64000, tuple(GpuSlot(g, "h100") for g in range(4))) for i in range(3)
)
BEST_FIT = Policy(use_priority=False, preemption=False)
END_AWARE = Policy(use_priority=False, preemption=False, placement="end-aware")


def job(job_id: int, gpus: int, limit: float | None = 100.0) -> PendingJob:
    return PendingJob(job_id, "u", f"j{job_id}", "main", 0, float(job_id), gpus=gpus,
                      time_limit_s=limit)  # fmt: skip


def running(job_id: int, node: str, gpus: tuple[int, ...], limit: float | None) -> Allocation:
    return Allocation(job_id, node, "u", gpu_indices=gpus, start_time=0.0, time_limit_s=limit)


def started_on(snap: Snapshot, policy: Policy) -> dict[int, str]:
    return {s.job_id: s.node for s in schedule(snap, 10.0, policy).starts}


def test_a_small_job_joins_the_node_that_stays_busy_longest() -> None:
    """n0's job ends at 100 s, n1's at 5,000 s: end-aware puts the new 1-GPU job on n1,
    so that n0 is whole again at 100 s; best fit takes the first of the two."""
    busy = (running(90, "n0", (0,), 100.0), running(91, "n1", (0,), 5000.0))
    snap = Snapshot(nodes=NODES[:2], running=busy, pending=(job(1, 1),))
    assert started_on(snap, BEST_FIT) == {1: "n0"}
    assert started_on(snap, END_AWARE) == {1: "n1"}


def test_a_job_without_a_limit_counts_as_ending_last() -> None:
    busy = (running(90, "n0", (0,), 5000.0), running(91, "n1", (0,), None))
    snap = Snapshot(nodes=NODES[:2], running=busy, pending=(job(1, 1),))
    assert started_on(snap, END_AWARE) == {1: "n1"}


def test_fewest_free_gpus_still_come_first() -> None:
    """n0 has 2 free GPUs and ends soon, n1 has 3 free and ends late: a 2-GPU job fills
    n0 (best fit) rather than splitting n1."""
    busy = (running(90, "n0", (0, 1), 100.0), running(91, "n1", (0,), 5000.0))
    snap = Snapshot(nodes=NODES[:2], running=busy, pending=(job(1, 2),))
    assert started_on(snap, END_AWARE) == {1: "n0"}


def test_the_order_follows_what_this_pass_started() -> None:
    """Two empty nodes: the first job's start makes its node the one that ends last, so
    the second small job joins it and the other node stays whole for the 4-GPU job."""
    pending = (job(1, 1, 1000.0), job(2, 1, 50.0), job(3, 4))
    snap = Snapshot(nodes=NODES[:2], running=(), pending=pending)
    placed = started_on(snap, END_AWARE)
    assert placed[1] == placed[2] and placed[3] != placed[1]


@given(
    ends=st.lists(st.one_of(st.none(), st.floats(20.0, 1e6)), min_size=3, max_size=3),
    used=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    gpus=st.integers(1, 4),
)
def test_end_aware_starts_a_job_where_best_fit_would_have_room(
    ends: list[float | None], used: list[int], gpus: int
) -> None:
    """Whatever the nodes hold, end-aware starts a job exactly when best fit does, on a
    node with the fewest free GPUs that fit it, and on the latest-ending of those."""
    busy = tuple(
        running(90 + i, n.name, tuple(range(k)), end) for i, (n, k, end) in
        enumerate(zip(NODES, used, ends, strict=True)) if k
    )  # fmt: skip
    snap = Snapshot(nodes=NODES, running=busy, pending=(job(1, gpus),))
    best, aware = started_on(snap, BEST_FIT), started_on(snap, END_AWARE)
    assert best.keys() == aware.keys()
    if not aware:
        return
    free = {n.name: 4 - k for n, k in zip(NODES, used, strict=True)}
    fitting = [name for name, f in free.items() if f >= gpus]
    fewest = min(free[name] for name in fitting)
    assert free[aware[1]] == fewest

    def end_of(name: str) -> float:
        i = int(name[1:])
        end = ends[i]
        if not used[i]:
            return float("-inf")
        return float("inf") if end is None else end

    latest = max(end_of(name) for name in fitting if free[name] == fewest)
    assert end_of(aware[1]) == latest


@given(
    takes=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 2), st.one_of(st.none(), st.floats(1, 1e5))),
        max_size=30,
    )
)
def test_the_index_kept_in_order_as_nodes_move_is_the_order_of_a_fresh_sort(
    takes: list[tuple[int, int, float | None]],
) -> None:
    """`Index.moved` keeps each bucket's end order as jobs start on its nodes (a node
    may stay in its bucket and still end later): the same order as sorting anew."""
    views = [NodeView(f"n{i}", 64, 64000, tuple(GpuSlot(g, "h100") for g in range(4)))
             for i in range(6)]  # fmt: skip
    nodes = [Node(v, v.cpus, v.memory_mb, [g.index for g in v.gpus]) for v in views]
    index = Index(nodes, 4, by_end=True)
    list(index.from_size(0))  # every bucket ordered now, then kept as nodes move
    for job_id, (at, gpus, limit) in enumerate(takes):
        node = nodes[at]
        gpus = min(gpus, len(node.free_gpus))
        before = len(node.free_gpus)
        alloc = Allocation(job_id, node.view.name, "u", gpu_indices=tuple(node.free_gpus[:gpus]),
                           start_time=0.0, time_limit_s=limit)  # fmt: skip
        node.take(alloc)
        index.moved(node, before)
        kept = [n.view.name for n in index.from_size(0)]
        fresh = Index([], 4, by_end=True)
        fresh.buckets = [dict(b) for b in index.buckets]
        assert kept == [n.view.name for n in fresh.from_size(0)]
