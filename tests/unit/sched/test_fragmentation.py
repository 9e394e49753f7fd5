"""Fragmentation-aware placement (podium.sched.fragmentation, `Policy.placement: fgd`)."""

from __future__ import annotations

from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot, schedule
from podium.sched.fit import Node
from podium.sched.fragmentation import free_of, parts_per_gpu, workload_of
from podium.sched.model import Policy

# two whole GPUs (0, 1); GPU 2 and GPU 3 shared by MPS, four units each (10-13, 20-23)
SHARED = [
    GpuSlot(i, "mps", whole=False, parent=2 + i // 20) for i in (10, 11, 12, 13, 20, 21, 22, 23)
]
NODE = NodeView("n0", 16, 64000, (GpuSlot(0, "h100"), GpuSlot(1, "h100"), *SHARED))
FGD = Policy(use_priority=False, preemption=False, placement="fgd")


def share(job_id: int, units: int, user: str = "u") -> PendingJob:
    return PendingJob(job_id, user, f"j{job_id}", "main", 0, float(job_id), gpus=units,
                      gpu_type="mps")  # fmt: skip


def holding(job_id: int, units: tuple[int, ...]) -> Allocation:
    return Allocation(job_id, "n0", "u", gpu_indices=units)


def test_fragmentation_is_the_free_capacity_each_kind_cannot_use() -> None:
    node = Node(NODE, 16, 64000, [g.index for g in NODE.gpus])
    node.take(holding(9, (10,)))  # GPU 2: 3 of 4 units free; GPU 3: 4 free
    per_gpu = parts_per_gpu([node])["n0"]
    assert per_gpu == {2: 4, 3: 4}
    now = free_of(node, per_gpu)
    free = 2 + 0.75 + 1.0
    # a whole GPU cannot use MPS units; 3 units fit either shared GPU; 4 only GPU 3
    assert now.fragmentation([((None, 1), 1.0)]) == 1.75
    assert now.fragmentation([(("mps", 3), 1.0)]) == 2.0
    assert now.fragmentation([(("mps", 4), 1.0)]) == free - 1.0
    assert now.fragmentation([((None, 3), 1.0)]) == free  # fits nowhere here
    mixed = [((None, 1), 0.5), (("mps", 4), 0.5)]
    assert now.fragmentation(mixed) == 0.5 * 1.75 + 0.5 * (free - 1.0)
    # taking units of GPU 3 leaves no GPU with 4 free: all of the shared capacity is lost
    assert now.without(node, (20,)).fragmentation([(("mps", 4), 1.0)]) == 2.0 + 1.5


def test_a_share_goes_where_the_workload_can_still_use_what_is_left() -> None:
    """Best fit puts 1 unit on GPU 2 (fewest free units), leaving 2 and 4 free; with a
    workload of 3-unit shares that strands GPU 2's two. FGD puts it on GPU 3 (3 and 3
    left, both usable)."""
    running = (holding(9, (10,)),)
    snap = Snapshot(nodes=(NODE,), running=running, pending=(share(1, 1),))
    best_fit = schedule(snap, 0.0, Policy(use_priority=False, preemption=False))
    assert best_fit.starts[0].gpu_indices == (11,)
    three = Snapshot(nodes=(NODE,), running=running, pending=(share(1, 1),),
                     workload=(("mps", 3, 1.0),))  # fmt: skip
    assert schedule(three, 0.0, FGD).starts[0].gpu_indices == (20,)
    # without a declared workload the pending jobs' mix is weighed (here: 1-unit shares)
    assert workload_of(snap) == [(("mps", 1), 1.0)]


def test_a_whole_gpu_job_goes_to_the_node_it_fragments_least() -> None:
    """n0 has 3 free GPUs, n1 4. Best fit (fewest free first) puts a 1-GPU job on n0,
    leaving 2 and 4; with a workload of 3-GPU jobs that strands n0's two. FGD puts it
    on n1 (3 and 3 left, both usable). With a workload of 1-GPU jobs every place is as
    good, and best fit's order holds."""
    n0 = NodeView("n0", 16, 64000, tuple(GpuSlot(i, "h100") for i in range(3)))
    n1 = NodeView("n1", 16, 64000, tuple(GpuSlot(i, "h100") for i in range(4)))
    one = PendingJob(1, "u", "j1", "main", 0, 1.0, gpus=1)
    plain = Snapshot(nodes=(n0, n1), pending=(one,))
    assert schedule(plain, 0.0, Policy(use_priority=False, preemption=False)).starts[0].node == "n0"
    threes = Snapshot(nodes=(n0, n1), pending=(one,), workload=((None, 3, 1.0),))
    assert schedule(threes, 0.0, FGD).starts[0].node == "n1"
    ones = Snapshot(nodes=(n0, n1), pending=(one,), workload=((None, 1, 1.0),))
    assert schedule(ones, 0.0, FGD).starts[0].node == "n0"
