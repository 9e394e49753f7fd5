"""Placement: the free resources of each node during a pass, and where a job fits now.

A job asks for `gpus`, `cpus` and `mem_mb` on each of its `nodes` nodes. Nodes are
chosen best-fit by free GPUs (a node with just enough free GPUs before a larger
one), and with `Policy.placement: end-aware`, among nodes with as many free, the one
whose running jobs end last (`Index`); within a node, GPUs close together
(`pick_gpus`).
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Iterable
from dataclasses import dataclass, field

from podium.api.states import Exclusive
from podium.sched.model import Allocation, NodeView, PendingJob


@dataclass
class Hold:
    """Room kept on a node for a reserved job from `time` on (see backfill)."""

    job_id: int
    time: float
    gpus: int  # free GPUs (of the job's type) left at `time` after the job takes its own
    cpus: int
    mem_mb: int
    user: str = ""
    exclusive: Exclusive = Exclusive.NONE


MPS = "mps"  # the type of an MPS unit (podium.node.slices)

# What a job asks of each node, for remembering what fits nowhere during a pass.
Request = tuple[str, int, int, str | None, int, int, str, str, frozenset[tuple[str, int]]]


def request_of(job: PendingJob) -> Request:
    """What `job` asks of each of its nodes: two jobs with the same request fit the
    same nodes (partition, node count, GPUs and their type, CPUs, memory, exclusivity
    and the GPUs it must avoid)."""
    return (
        job.partition,
        job.nodes,
        job.gpus,
        job.gpu_type,
        job.cpus,
        job.mem_mb,
        job.exclusive,
        job.user if job.exclusive == "user" else "",
        job.avoid_gpus,
    )


@dataclass(eq=False)  # one object per node and pass: compared by identity
class Node:
    """A node's free resources during a pass."""

    view: NodeView
    cpus: int
    mem_mb: int
    free_gpus: list[int]
    allocs: list[Allocation] = field(default_factory=list)
    users: set[str] = field(default_factory=set)
    exclusive_node: bool = False
    exclusive_users: set[str] = field(default_factory=set)
    hold: Hold | None = None
    types: dict[int, str] = field(default_factory=dict)
    slices: frozenset[int] = frozenset()  # parts of GPUs: given only to jobs naming their type
    parents: dict[int, int] = field(default_factory=dict)  # part -> its GPU
    mps_users: dict[int, set[str]] = field(default_factory=dict)  # GPU -> users of MPS on it
    elastic_jobs: int = 0  # elastic jobs here that may shrink (not started by this pass)

    def __post_init__(self) -> None:
        self.types = {g.index: g.type for g in self.view.gpus}
        self.slices = frozenset(g.index for g in self.view.gpus if not g.whole)
        if self.slices:
            self.parents = {g.index: g.parent for g in self.view.gpus if g.parent is not None}

    def take(self, alloc: Allocation) -> None:
        self.cpus -= alloc.cpus
        self.mem_mb -= alloc.mem_mb
        if alloc.gpu_indices:
            taken = set(alloc.gpu_indices)
            self.free_gpus = [g for g in self.free_gpus if g not in taken]
            if self.parents:  # parts of GPUs here: note who uses MPS on which GPU
                for g in alloc.gpu_indices:
                    if self.types.get(g) == MPS and g in self.parents:
                        self.mps_users.setdefault(self.parents[g], set()).add(alloc.user)
        self.allocs.append(alloc)
        if alloc.elastic is not None and not alloc.starting:
            self.elastic_jobs += 1
        self.users.add(alloc.user)
        if alloc.exclusive == "node":
            self.exclusive_node = True
        elif alloc.exclusive == "user":
            self.exclusive_users.add(alloc.user)

    def busy_until(self) -> float:
        """When its last job ends, by its limit or reported progress (inf: one has no
        end; -inf: nothing runs here). Read by end-aware placement only."""
        ends = (alloc.end_time() for alloc in self.allocs)
        return max((math.inf if end is None else end for end in ends), default=-math.inf)

    def gpus_of(self, gpu_type: str | None) -> list[int]:
        """The free GPUs of `gpu_type` (None: the whole GPUs, not MIG slices)."""
        if gpu_type is None:
            if not self.slices:
                return self.free_gpus
            return [g for g in self.free_gpus if g not in self.slices]
        return [g for g in self.free_gpus if self.types[g] == gpu_type]

    def matching(self, indices: Iterable[int], gpu_type: str | None) -> int:
        """How many of these GPU indices are of `gpu_type` (None: whole GPUs)."""
        if gpu_type is None:
            return sum(1 for g in indices if g not in self.slices)
        return sum(1 for g in indices if self.types[g] == gpu_type)


class Index:
    """Nodes bucketed by how many GPUs they have free, for best-fit lookups."""

    def __init__(self, nodes: Iterable[Node], max_gpus: int, by_end: bool = False) -> None:
        self.buckets: list[dict[str, Node]] = [{} for _ in range(max_gpus + 1)]
        for node in nodes:
            self.buckets[len(node.free_gpus)][node.view.name] = node
        self.by_end = by_end
        self.ordered: list[list[Node] | None] = [None] * (max_gpus + 1)

    def moved(self, node: Node, before: int) -> None:
        del self.buckets[before][node.view.name]
        after = len(node.free_gpus)
        self.buckets[after][node.view.name] = node
        left, joined = self.ordered[before], self.ordered[after]
        if left is not None:
            left.remove(node)
        if joined is not None:  # after the nodes that end as late: as a dict appends
            insort(joined, node, key=_ends_last_first)

    def from_size(self, gpus: int) -> Iterable[Node]:
        """Nodes with at least `gpus` free GPUs, fewest free first; with `by_end`,
        among as many free, the node whose jobs end last first (do not `moved` a node
        while iterating)."""
        for size in range(gpus, len(self.buckets)):
            bucket = self.buckets[size]
            if not self.by_end or len(bucket) < 2:
                yield from bucket.values()
                continue
            ordered = self.ordered[size]
            if ordered is None:
                ordered = sorted(bucket.values(), key=_ends_last_first)
                self.ordered[size] = ordered
            yield from ordered

    def any_free(self) -> bool:
        """Whether any node has a free GPU."""
        return any(self.buckets[1:])


def _ends_last_first(node: Node) -> float:
    return -node.busy_until()


def fits_now(job: PendingJob, node: Node) -> tuple[int, ...] | None:
    """The GPUs `job` would get on `node` now (its per-node share), or None."""
    usable = usable_gpus(job, node)
    if usable is None:
        return None
    if job.gpu_type == MPS:
        return pick_mps(job, node, usable)
    return pick_gpus(usable, job.gpus, node.view.gpu_groups)


def choices_now(job: PendingJob, node: Node) -> list[tuple[int, ...]]:
    """Every way `job` could take GPUs on `node` now that placement may choose from:
    each GPU's MPS units for an MPS share, else `fits_now`'s one choice."""
    usable = usable_gpus(job, node)
    if usable is None:
        return []
    if job.gpu_type == MPS:
        return mps_choices(job, node, usable)
    return [pick_gpus(usable, job.gpus, node.view.gpu_groups)]


def usable_gpus(job: PendingJob, node: Node) -> list[int] | None:
    """The free GPU slots `job` may take on `node` now, or None when it cannot start
    there (CPUs, memory, exclusivity, or too few GPUs of its type)."""
    if job.cpus > node.cpus or job.mem_mb > node.mem_mb or node.exclusive_node:
        return None
    if job.exclusive == "node" and node.users:
        return None
    if node.exclusive_users and node.exclusive_users - {job.user}:
        return None
    if job.exclusive == "user" and node.users - {job.user}:
        return None
    usable = node.gpus_of(job.gpu_type)
    if job.avoid_gpus:
        usable = [g for g in usable if (node.view.name, g) not in job.avoid_gpus]
    if len(usable) < job.gpus:
        return None
    return usable


def pick_mps(job: PendingJob, node: Node, usable: list[int]) -> tuple[int, ...] | None:
    """`job.gpus` MPS units of one GPU, on no GPU whose MPS server serves another user
    (an MPS server runs as one user): the GPU with the fewest free units that fits."""
    fitting = _mps_fitting(job, node, usable)
    if not fitting:
        return None
    return _first_units(min(fitting, key=_fewest_free), job.gpus)


def mps_choices(job: PendingJob, node: Node, usable: list[int]) -> list[tuple[int, ...]]:
    """Every GPU's `job.gpus` MPS units that `job` may take (no other user's MPS server
    there), the GPU with the fewest free units first."""
    fitting = sorted(_mps_fitting(job, node, usable), key=_fewest_free)
    return [_first_units(free, job.gpus) for free in fitting]


def _mps_fitting(job: PendingJob, node: Node, usable: list[int]) -> list[tuple[int, list[int]]]:
    """(GPU, its free units) for each GPU where `job` may take `job.gpus` units."""
    by_gpu: dict[int, list[int]] = {}
    for g in usable:
        by_gpu.setdefault(node.parents.get(g, g), []).append(g)
    return [
        (gpu, free)
        for gpu, free in by_gpu.items()
        if len(free) >= job.gpus and not node.mps_users.get(gpu, set()) - {job.user}
    ]


def _fewest_free(gpu_units: tuple[int, list[int]]) -> tuple[int, int]:
    return len(gpu_units[1]), gpu_units[0]


def _first_units(gpu_units: tuple[int, list[int]], count: int) -> tuple[int, ...]:
    return tuple(sorted(gpu_units[1])[:count])


def pick_gpus(free: list[int], need: int, groups: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Choose `need` of the `free` GPUs, keeping a job's GPUs close together.

    With a known topology (groups of GPUs behind one NVLink domain or PCIe switch):
    the group that fits the job with the fewest GPUs to spare, so larger groups stay
    whole for larger jobs; when no single group fits, the fewest groups, largest
    first. Without a topology: the lowest indices.
    """
    if need == 0:
        return ()
    if not groups:
        return tuple(sorted(free)[:need])
    free_set = set(free)
    grouped = [sorted(free_set & set(g)) for g in groups]
    seen = {i for g in groups for i in g}
    grouped += [[i] for i in sorted(free_set - seen)]
    grouped = [g for g in grouped if g]
    fitting = [g for g in grouped if len(g) >= need]
    if fitting:
        best = min(fitting, key=lambda g: (len(g), g[0]))
        return tuple(best[:need])
    chosen: list[int] = []
    for g in sorted(grouped, key=lambda g: (-len(g), g[0])):
        chosen.extend(g[: need - len(chosen)])
        if len(chosen) == need:
            break
    return tuple(sorted(chosen))


def could_ever_fit(job: PendingJob, node: NodeView) -> bool:
    """Whether `job`'s per-node share fits `node` when the node is empty."""
    if job.cpus > node.cpus or job.mem_mb > node.memory_mb:
        return False
    if job.gpu_type is None:
        return job.gpus <= sum(1 for g in node.gpus if g.whole)
    if job.gpu_type == MPS:  # from one GPU
        per_gpu: dict[int | None, int] = {}
        for g in node.gpus:
            if g.type == MPS:
                per_gpu[g.parent] = per_gpu.get(g.parent, 0) + 1
        return job.gpus <= max(per_gpu.values(), default=0)
    return job.gpus <= sum(1 for g in node.gpus if g.type == job.gpu_type)
