"""The MIG layout advisor: which layout each MIG-capable GPU should have for the jobs
waiting now, and what it costs to get there. Pure: no I/O, the clock passed in.

Slurm expects MIG partitioned in advance and Kubernetes' GPU Operator applies a
mig-parted config by node label; neither says which layout the queue needs. `advise`
searches the valid layouts of each GPU (`layouts(model)`: every set of profiles that
`podium.api.mig.place` accepts, plus the GPU whole) and scores the node's layouts
together by what the pending queue would get:

1. jobs admitted: pending jobs (highest priority first) that fit the layouts' devices
   once the changed GPUs are free;
2. priority-weighted waiting: the sum of priority x seconds waited of those jobs;
3. GPUs to drain: changed GPUs with running jobs (fewer is better);
4. the largest free slice left (compute slices), room for the next job.

The search is coordinate ascent: each GPU in turn (idle ones first) takes the layout
that scores best with the others fixed, until no GPU changes (a few rounds). Each
advised change comes with its drain plan: the running jobs on the GPU and when they
are expected to end (their time limits).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

from podium.api.mig import MigLayoutError, place, profiles, slice_counts

WHOLE: tuple[str, ...] = ()  # the layout of a GPU not in MIG mode


@dataclass(frozen=True)
class Running:
    """A running job on a GPU (whole or on one of its slices)."""

    job_id: int
    device: str  # its profile, or "whole"
    end_estimate: float  # start + time limit (inf: no limit)


@dataclass(frozen=True)
class GpuNow:
    """A MIG-capable GPU as it is: its model, its layout (WHOLE when not in MIG
    mode), the jobs running on it."""

    index: int
    model: str
    layout: tuple[str, ...]
    running: tuple[Running, ...] = ()


@dataclass(frozen=True)
class Waiting:
    """A pending job's GPU demand: `count` devices of `kind` (a profile, or "whole"),
    its priority and when it was submitted (an array's tasks: one each, same id)."""

    job_id: int
    kind: str
    count: int
    priority: float
    submit_time: float


@dataclass(frozen=True)
class Score:
    """How good a set of layouts is for the queue (compared as a tuple, larger better)."""

    admitted: int
    weighted_wait: float
    drains: int
    largest_free: int

    def key(self) -> tuple[int, float, int, int]:
        return (self.admitted, round(self.weighted_wait, 3), -self.drains, self.largest_free)


@dataclass(frozen=True)
class Change:
    """The advice for one GPU: its layout now and advised, the jobs the change lets
    start, and what must drain first."""

    gpu: int
    model: str
    now: tuple[str, ...]
    advised: tuple[str, ...]
    admits: tuple[int, ...]  # pending jobs placed on this GPU's devices
    drain: tuple[Running, ...]  # running jobs that must end before the change
    ready_at: float  # when the drain is expected to be over (now when idle)

    @property
    def changes(self) -> bool:
        return sorted(self.now) != sorted(self.advised)


@dataclass(frozen=True)
class Advice:
    """The advised layouts, ranked changes first (by jobs admitted), and the scores
    of the layouts now and advised."""

    changes: tuple[Change, ...]
    before: Score
    after: Score
    unplaceable: tuple[int, ...] = field(default=())  # jobs no layout of these GPUs fits


@cache
def layouts(model: str) -> tuple[tuple[str, ...], ...]:
    """Every layout a GPU of `model` can take: WHOLE, then each multiset of profiles
    that places (largest profiles first within a layout), without duplicates."""
    names = sorted(profiles(model).values(), key=lambda p: (-p.memory, -p.compute, p.name))
    found: list[tuple[str, ...]] = [WHOLE]

    def grow(layout: list[str], first: int) -> None:
        for i in range(first, len(names)):
            candidate = [*layout, names[i].name]
            try:
                place(model, candidate)
            except MigLayoutError:
                continue
            found.append(tuple(candidate))
            grow(candidate, i)

    grow([], 0)
    return tuple(found)


def advise(gpus: Sequence[GpuNow], waiting: Sequence[Waiting], now: float) -> Advice:
    """The layouts that serve `waiting` best on `gpus` (see the module's doc)."""
    order = sorted(waiting, key=lambda w: (-w.priority, w.submit_time, w.job_id))
    current = [g.layout for g in gpus]
    choice = list(current)
    best = _score(gpus, choice, order, now)
    idle_first = sorted(range(len(gpus)), key=lambda i: (len(gpus[i].running), gpus[i].index))
    for _ in range(4):  # coordinate ascent; stops when a round changes nothing
        moved = False
        for i in idle_first:  # idle GPUs first: a change there drains nothing
            gpu = gpus[i]
            for layout in layouts(gpu.model):
                if layout == choice[i]:
                    continue
                trial = [*choice[:i], layout, *choice[i + 1 :]]
                score = _score(gpus, trial, order, now)
                if score.key() > best.key():
                    choice, best, moved = trial, score, True
        if not moved:
            break
    placed = _admit(gpus, choice, order)
    changes = []
    for i, gpu in enumerate(gpus):
        drain = gpu.running if sorted(choice[i]) != sorted(gpu.layout) else ()
        ready = max((r.end_estimate for r in drain), default=now)
        changes.append(
            Change(
                gpu.index,
                gpu.model,
                gpu.layout,
                choice[i],
                tuple(order[k].job_id for k, on in placed.items() if i in on),
                drain,
                ready,
            )
        )
    changes.sort(key=lambda c: (not c.changes, -len(c.admits), c.gpu))
    fits_some = {k for g in gpus for layout in layouts(g.model) for k in _kinds(layout)}
    unplaceable = tuple(w.job_id for w in order if w.kind not in fits_some)
    return Advice(tuple(changes), _score(gpus, current, order, now), best, unplaceable)


def _kinds(layout: tuple[str, ...]) -> set[str]:
    return set(layout) if layout else {"whole"}


def _score(
    gpus: Sequence[GpuNow], choice: Sequence[tuple[str, ...]], order: Sequence[Waiting], now: float
) -> Score:
    placed = _admit(gpus, choice, order)
    weighted = sum(order[k].priority * max(0.0, now - order[k].submit_time) for k in placed)
    drains = sum(
        1
        for gpu, layout in zip(gpus, choice, strict=True)
        if gpu.running and sorted(layout) != sorted(gpu.layout)
    )
    return Score(len(placed), weighted, drains, _largest_free(gpus, choice, order, placed))


def _free_devices(gpus: Sequence[GpuNow], choice: Sequence[tuple[str, ...]]) -> list[Counter[str]]:
    """Each GPU's devices free for pending jobs under `choice`: all of a changed GPU's
    (once drained), an unchanged one's less those its running jobs hold."""
    free = []
    for gpu, layout in zip(gpus, choice, strict=True):
        devices = Counter(layout) if layout else Counter({"whole": 1})
        if sorted(layout) == sorted(gpu.layout):
            devices -= Counter(r.device for r in gpu.running)
        free.append(devices)
    return free


def _admit(
    gpus: Sequence[GpuNow], choice: Sequence[tuple[str, ...]], order: Sequence[Waiting]
) -> dict[int, tuple[int, ...]]:
    """Place in `order` (its position) -> the GPU positions it is placed on, for the
    pending jobs that fit, in priority order: slices from one GPU, whole GPUs from as
    many as it asks for; a job that does not fit is skipped, as backfill would."""
    free = _free_devices(gpus, choice)
    placed: dict[int, tuple[int, ...]] = {}
    for k, w in enumerate(order):
        if w.kind == "whole":
            spare = [i for i, devices in enumerate(free) if devices["whole"] > 0]
            if len(spare) >= w.count:
                for i in spare[: w.count]:
                    free[i]["whole"] -= 1
                placed[k] = tuple(spare[: w.count])
            continue
        for i, devices in enumerate(free):
            if devices[w.kind] >= w.count:
                devices[w.kind] -= w.count
                placed[k] = (i,)
                break
    return placed


def _largest_free(
    gpus: Sequence[GpuNow],
    choice: Sequence[tuple[str, ...]],
    order: Sequence[Waiting],
    placed: dict[int, tuple[int, ...]],
) -> int:
    """The compute slices of the largest device left free once the admitted jobs are
    placed (a whole GPU counts as all its compute slices: 7, an A30's 4)."""
    free = _free_devices(gpus, choice)
    for k, on in placed.items():
        w = order[k]
        for i in on:
            free[i][w.kind] -= 1 if w.kind == "whole" else w.count
    largest = 0
    for gpu, devices in zip(gpus, free, strict=True):
        known = profiles(gpu.model)
        for kind, n in devices.items():
            if n > 0:
                size = slice_counts(gpu.model)[1] if kind == "whole" else known[kind].compute
                largest = max(largest, size)
    return largest


__all__ = [
    "WHOLE",
    "Advice",
    "Change",
    "GpuNow",
    "Running",
    "Score",
    "Waiting",
    "advise",
    "layouts",
]
