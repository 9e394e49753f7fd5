"""GPU sharing in the simulator: how a trace's fractional GPU requests (Alibaba's
`gpu_milli` < 1000 of one GPU) are served.

Modes:
- "whole": rounded up to one whole GPU (what the cluster does without sharing);
- "mps": each node puts `k` of its GPUs in MPS mode, `units` units each; a fractional
  task asks for ceil(milli x units / 1000) units of one GPU, as `--gres=mps:N`;
- "mig": `k` GPUs per node are split in the layouts `podium mig advise` gives for the
  trace's mix of fractional requests (an H100 80GB's profiles); a task asks for the
  smallest profile with at least its fraction of the compute (3g.40gb for 0.32), and
  one needing more than 4 of 7 compute slices takes a whole GPU.

`k`, the GPUs shared per node, follows the trace: the share of the GPUs the fractional
tasks hold when each is rounded up to a whole GPU (GPU-seconds), at least one GPU:
sharing packs on those GPUs what would have taken them whole. A task whose profile
none of the advised layouts has takes the smallest larger slice there is, else a
whole GPU. Whole-GPU tasks take whole GPUs only. The
same scheduling core runs in every mode (MIG slices and MPS units are GPU slots of
their type, as on the embedded cluster).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from podium.api.mig import COMPUTE_SLICES, profiles
from podium.sched.mig_advice import WHOLE, GpuNow, Waiting, advise
from podium.sched.model import GpuSlot, NodeView
from podium.sim.traces import TraceJob, TraceNode

MODES = ("whole", "mps", "mig")
MIG_MODEL = "h100-80gb"
MPS = "mps"


def fractional(job: TraceJob) -> bool:
    """Whether the task asks for part of one GPU."""
    return 0 < job.gpu_milli < 1000


def mig_profile(milli: int) -> str | None:
    """The smallest profile with at least `milli`/1000 of the compute; None when that
    is more than 4 of 7 slices (such a task takes a whole GPU)."""
    need = math.ceil(milli * COMPUTE_SLICES / 1000)
    fitting = [p for p in profiles(MIG_MODEL).values() if p.compute >= need and p.compute <= 4]
    if not fitting:
        return None
    return min(fitting, key=lambda p: (p.compute, p.memory)).name


@dataclass(frozen=True)
class SharingPlan:
    """How every node shares its GPUs in one simulation."""

    mode: str
    shared_per_node: int = 0
    units: int = 100
    layouts: tuple[tuple[str, ...], ...] = ()  # mig: one per shared GPU

    def view(self, node: TraceNode) -> NodeView:
        """The node's GPU slots: its whole GPUs, then its shared GPUs' units or slices."""
        k = min(self.shared_per_node, node.gpus) if self.mode != "whole" else 0
        slots = [GpuSlot(i, node.gpu_type) for i in range(node.gpus - k)]
        for g in range(node.gpus - k, node.gpus):
            if self.mode == MPS:
                parts = [MPS] * self.units
            else:
                parts = list(self.layouts[(g - (node.gpus - k)) % len(self.layouts)])
            if not parts:  # the advisor left it whole
                slots.append(GpuSlot(g, node.gpu_type))
            for kind in parts:
                slots.append(GpuSlot(node.gpus + len(slots), kind, whole=False, parent=g))
        return NodeView(node.name, node.cpus, node.mem_mb, tuple(slots))

    def request(self, job: TraceJob) -> tuple[str | None, int, float]:
        """(GPU type, count, share of a GPU charged) a task asks for; whole GPUs for a
        task that is not fractional, or in mode whole."""
        if self.mode == "whole" or not fractional(job):
            return None, job.gpus, float(job.gpus)
        if self.mode == MPS:
            units = max(1, math.ceil(job.gpu_milli * self.units / 1000))
            return MPS, units, units / self.units
        profile = self.slice_for(job.gpu_milli)
        if profile is None:
            return None, 1, 1.0
        return profile, 1, profiles(MIG_MODEL)[profile].compute / COMPUTE_SLICES

    def slice_for(self, milli: int) -> str | None:
        """The smallest slice of the advised layouts with `milli`'s compute (None: a
        whole GPU)."""
        wanted = mig_profile(milli)
        if wanted is None:
            return None
        known = profiles(MIG_MODEL)
        there = {p for layout in self.layouts for p in layout}
        need = known[wanted].compute
        bigger = [known[p] for p in there if known[p].compute >= need]
        return min(bigger, key=lambda p: (p.compute, p.memory)).name if bigger else None


def plan(trace: list[TraceJob], nodes: list[TraceNode], mode: str, units: int = 100) -> SharingPlan:
    """The sharing of `mode` sized to `trace` (see the module's doc)."""
    if mode == "whole" or not any(fractional(j) for j in trace):
        return SharingPlan("whole")
    per_node = max((n.gpus for n in nodes), default=0)
    part = sum(j.duration for j in trace if fractional(j))  # GPU-seconds, rounded up
    total = part + sum(j.gpus * j.duration for j in trace if not fractional(j))
    k = min(per_node, max(1, round(per_node * part / total))) if total else 1
    if mode == MPS:
        return SharingPlan(MPS, k, units)
    return SharingPlan("mig", k, units, advised_layouts(trace, k))


def advised_layouts(trace: list[TraceJob], k: int) -> tuple[tuple[str, ...], ...]:
    """The advisor's layouts for `k` idle GPUs given the trace's mix of MIG requests
    (scaled to what `k` GPUs could hold at once)."""
    mix = Counter(p for j in trace if fractional(j) and (p := mig_profile(j.gpu_milli)))
    if not mix:
        return (WHOLE,) * k
    total = sum(mix.values())
    waiting = [
        Waiting(n, profile, 1, 1.0, 0.0)
        for n, (profile, count) in enumerate(
            (p, c) for p, c in mix.items() for _ in range(max(1, round(c / total * 7 * k)))
        )
    ]
    gpus = [GpuNow(i, MIG_MODEL, WHOLE) for i in range(k)]
    advice = advise(gpus, waiting, 0.0)
    chosen = {c.gpu: c.advised for c in advice.changes}
    return tuple(chosen[i] or WHOLE for i in range(k))


__all__ = ["MODES", "SharingPlan", "fractional", "mig_profile", "plan"]
