"""Fragmentation-aware placement, in the spirit of Fragmentation Gradient Descent
(Weng et al., "Beware of Fragmentation", USENIX ATC '23, published with the Alibaba
GPU trace).

A node's fragmentation for one kind of request is the free GPU capacity on it that a
request of that kind cannot use: all of it when the request fits nowhere on the node,
else the free capacity it cannot reach (MPS units of GPUs with fewer free units than
it asks, for an MPS share; free parts of GPUs, for a whole-GPU job; whole GPUs and
other parts, for a part). A whole free GPU counts 1, a free part its share of its GPU.
The node's fragmentation is the mean over the workload's kinds, weighted by how often
each comes (`Snapshot.workload`, else the pending jobs' own mix).

`Policy.placement: fgd` puts a single-node job where its start raises its node's
fragmentation least, among the first `CANDIDATES` nodes that fit in best fit's order
(each GPU of a node being a choice for an MPS share); equal places keep best fit's
order. FGD itself weighs every node; the bound keeps a pass's cost flat on a large
cluster. CPUs and memory are not weighed, nor which user's MPS server holds a GPU.

Pure: reads a pass's node state, writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from podium.sched.fit import MPS, Node
from podium.sched.model import Snapshot

Kind = tuple[str | None, int]  # (GPU type, count) of one request: None is whole GPUs
CANDIDATES = 64  # nodes weighed per placement, the best-fitting first


def workload_of(snapshot: Snapshot) -> list[tuple[Kind, float]]:
    """The kinds of request expected and their weights (summing to 1): the snapshot's
    declared workload, else its pending jobs' mix."""
    given = [((t, n), w) for t, n, w in snapshot.workload if w > 0]
    if not given:
        counts = Counter((j.gpu_type, j.gpus) for j in snapshot.pending if j.gpus > 0)
        given = [(kind, float(c)) for kind, c in counts.items()]
    total = sum(w for _, w in given)
    return [(kind, w / total) for kind, w in given] if total else []


@dataclass
class Free:
    """A node's free GPU capacity: whole GPUs, and each shared GPU's free parts
    (count, parts it has, their type)."""

    whole: int
    parts: dict[int, tuple[int, int, str]]

    def without(self, node: Node, taken: Iterable[int]) -> Free:
        """The same once the GPU slots `taken` are gone."""
        whole, parts = self.whole, dict(self.parts)
        for g in taken:
            if g in node.slices:
                gpu = node.parents.get(g, g)
                count, total, kind = parts[gpu]
                parts[gpu] = (count - 1, total, kind)
            else:
                whole -= 1
        return Free(whole, parts)

    def fragmentation(self, workload: Sequence[tuple[Kind, float]]) -> float:
        """The free capacity the workload's kinds cannot use, weighted (GPUs' worth)."""
        share = {gpu: count / total for gpu, (count, total, _) in self.parts.items() if total}
        free = self.whole + sum(share.values())
        result = 0.0
        for (kind, count), weight in workload:
            if kind is None:
                usable = float(self.whole) if self.whole >= count else 0.0
            elif kind == MPS:  # from one GPU
                usable = sum(
                    share[g] for g, (n, _, k) in self.parts.items() if k == MPS and n >= count
                )
            else:
                typed = [g for g, (n, _, k) in self.parts.items() if k == kind and n]
                have = sum(self.parts[g][0] for g in typed)
                usable = sum(share[g] for g in typed) if have >= count else 0.0
            result += weight * (free - usable)
        return result


def free_of(node: Node, per_gpu: dict[int, int]) -> Free:
    """`node`'s free capacity now (`per_gpu`: each shared GPU's number of parts)."""
    whole = 0
    counts: Counter[int] = Counter()
    kinds: dict[int, str] = {}
    for g in node.free_gpus:
        if g in node.slices:
            gpu = node.parents.get(g, g)
            counts[gpu] += 1
            kinds[gpu] = node.types.get(g, "")
        else:
            whole += 1
    return Free(whole, {g: (c, per_gpu.get(g, c), kinds[g]) for g, c in counts.items()})


def parts_per_gpu(nodes: Iterable[Node]) -> dict[str, dict[int, int]]:
    """For each node, each shared GPU's number of parts."""
    out: dict[str, dict[int, int]] = {}
    for node in nodes:
        count: Counter[int] = Counter()
        for g in node.view.gpus:
            if not g.whole and g.parent is not None:
                count[g.parent] += 1
        out[node.view.name] = dict(count)
    return out


@dataclass(frozen=True)
class FragmentationContext:
    """What one pass places by: the workload's kinds and each node's parts per GPU."""

    workload: list[tuple[Kind, float]]
    per_node: dict[str, dict[int, int]]


def least_fragmenting(
    choices: Sequence[tuple[Node, tuple[int, ...]]], context: FragmentationContext
) -> int:
    """The index of the choice (node, GPU slots) whose start raises its node's
    fragmentation least; the first of equals."""
    best, best_rise = 0, float("inf")
    before: dict[str, tuple[Free, float]] = {}
    for i, (node, gpus) in enumerate(choices):
        name = node.view.name
        if name not in before:
            now = free_of(node, context.per_node.get(name, {}))
            before[name] = (now, now.fragmentation(context.workload))
        now, frag = before[name]
        rise = now.without(node, gpus).fragmentation(context.workload) - frag
        if rise < best_rise - 1e-12:
            best, best_rise = i, rise
    return best


__all__ = [
    "CANDIDATES",
    "FragmentationContext",
    "Free",
    "free_of",
    "least_fragmenting",
    "parts_per_gpu",
    "workload_of",
]
