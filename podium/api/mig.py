"""MIG profiles and their placement rules, per GPU model, and the check of a layout
against them (shared by the config, the inventory and the scheduler).

A MIG-capable GPU of the A100, H100, H200, B200 and GB200 families has 8 memory slices
and 7 compute slices. Each profile takes a fixed number of memory slices and may start
only at some of them: on an H100 80GB, 1g.10gb x7 at 0-6, 1g.20gb x4 at 0/2/4/6,
2g.20gb x3 at 0/2/4, 3g.40gb x2 at 0/4, 4g.40gb at 0, 7g.80gb at 0 (what `nvidia-smi
mig -lgipp` lists, and what a real H100 showed; DESIGN.md). Those models differ only
in the profiles' memory sizes, so one table of shapes serves them all. The A30 has 4
memory and 4 compute slices: 1g.6gb x4, 2g.12gb x2 at 0/2, 4g.24gb at 0 (NVIDIA's MIG
user guide; the +me media variants are not offered).

CUDA enumerates one MIG device per process: a job holding several slices must run
one task per slice (`several_slices_refusal`), each bound to its own.

`place(model, profiles)` finds where a layout's slices can go (biggest first, each at
its lowest free start, backtracking: "all-balanced", 3g.40gb + 2g.20gb + 2 x 1g.10gb,
fits only with the 3g.40gb at 4), or raises MigLayoutError with one line naming the
rule the layout breaks. Pure: no NVML, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

MEMORY_SLICES = 8
COMPUTE_SLICES = 7

# The shapes every MIG model shares: (compute slices, memory slices, allowed starts),
# by the profile's place in the model's list of names below.
SHAPES: tuple[tuple[int, int, tuple[int, ...]], ...] = (
    (1, 1, (0, 1, 2, 3, 4, 5, 6)),  # 1g.<m>
    (1, 2, (0, 2, 4, 6)),  # 1g.<2m>
    (2, 2, (0, 2, 4)),  # 2g.<2m>
    (3, 4, (0, 4)),  # 3g.<4m>
    (4, 4, (0,)),  # 4g.<4m>
    (7, 8, (0,)),  # 7g.<8m>
)
# The A30's: 4 memory slices, 4 compute slices.
A30_SHAPES: tuple[tuple[int, int, tuple[int, ...]], ...] = (
    (1, 1, (0, 1, 2, 3)),  # 1g.6gb
    (2, 2, (0, 2)),  # 2g.12gb
    (4, 4, (0,)),  # 4g.24gb
)
MODELS: dict[str, tuple[str, ...]] = {
    "a30-24gb": ("1g.6gb", "2g.12gb", "4g.24gb"),
    "a100-40gb": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "a100-80gb": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "h100-80gb": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "h100-94gb": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "h200-141gb": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
    "b200-180gb": ("1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"),
    "gb200-186gb": ("1g.23gb", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"),
}
# (memory slices, compute slices, shapes) of the models that differ from the rest
GEOMETRY: dict[str, tuple[int, int, tuple[tuple[int, int, tuple[int, ...]], ...]]] = {
    "a30-24gb": (4, 4, A30_SHAPES),
}
TITLES = {
    "a30-24gb": "A30 24GB",
    "a100-40gb": "A100 40GB",
    "a100-80gb": "A100 80GB",
    "h100-80gb": "H100 80GB",
    "h100-94gb": "H100 NVL 94GB",
    "h200-141gb": "H200 141GB",
    "b200-180gb": "B200 180GB",
    "gb200-186gb": "GB200 186GB",
}


class MigLayoutError(ValueError):
    """A MIG layout the GPU cannot take; the message names the rule, in one line."""


@dataclass(frozen=True)
class Profile:
    """A MIG profile of one model: its name and shape."""

    name: str
    compute: int
    memory: int
    starts: tuple[int, ...]

    def rule(self) -> str:
        """Its placement rule, as the error messages say it."""
        at = "/".join(str(s) for s in self.starts)
        return f"{self.name} takes {self.memory} memory slice(s) at start {at}"


@dataclass(frozen=True)
class Slice:
    """One placed slice: its profile and first memory slice."""

    profile: Profile
    start: int


def model_for(gpu_type: str, memory_mb: int | None) -> str | None:
    """The MIG model of a GPU by its type name (h100, a100, h200, or a model key) and
    memory; None for a GPU without MIG."""
    key = gpu_type.lower()
    if key in MODELS:
        return key
    gb = (memory_mb or 0) / 1024
    if key.startswith("a100"):
        return "a100-80gb" if gb > 60 else "a100-40gb"
    if key.startswith("h100"):
        return "h100-94gb" if gb > 85 else "h100-80gb"
    if key.startswith("h200"):
        return "h200-141gb"
    if key.startswith("a30"):
        return "a30-24gb"
    if key.startswith("b200"):
        return "b200-180gb"
    if key.startswith("gb200"):
        return "gb200-186gb"
    return None


def slice_counts(model: str) -> tuple[int, int]:
    """(memory slices, compute slices) of one GPU of `model`."""
    memory, compute, _ = GEOMETRY.get(model, (MEMORY_SLICES, COMPUTE_SLICES, SHAPES))
    return memory, compute


def profiles(model: str) -> dict[str, Profile]:
    """The profiles of `model`, by name, smallest first."""
    names = MODELS[model]
    shapes = GEOMETRY[model][2] if model in GEOMETRY else SHAPES
    return {
        name: Profile(name, compute, memory, starts)
        for name, (compute, memory, starts) in zip(names, shapes, strict=True)
    }


def compute_fraction(profile: str) -> float:
    """The part of its GPU's compute a profile has, by its name (3g.40gb: 3 of 7
    compute slices; the A30's 2g.12gb: 2 of 4); 1.0 for a name no model has."""
    for model, names in MODELS.items():
        if profile in names:
            return profiles(model)[profile].compute / slice_counts(model)[1]
    return 1.0


def is_mig_profile(name: str) -> bool:
    """Whether `name` is a MIG profile's (`<compute>g.<memory>gb`, with +me or not),
    of any model: what NVML names a slice of a GPU whose model Podium may not list."""
    return re.fullmatch(r"[1-8]g\.\d+gb(\+me)?", name) is not None


def several_slices_refusal(profile: str, slices: int, ntasks: int) -> str | None:
    """Why a job of `ntasks` tasks may not hold `slices` MIG slices of `profile` (None:
    it may). CUDA enumerates one MIG device per process, so a process given several
    uses the first and the others sit idle: several slices need one task per slice
    (each task is bound to its own)."""
    if slices <= 1 or ntasks == slices:
        return None
    return (
        f"{slices} x {profile} MIG slices for {ntasks} task(s): CUDA uses one MIG slice per "
        f"process, so run one task per slice (--ntasks={slices}: each task gets its own "
        f"slice) or ask for one slice (--gres=gpu:{profile}:1)"
    )


def place(model: str, layout: list[str]) -> list[Slice]:
    """Where the slices of `layout` (profile names, any order) go on one GPU of
    `model`, in the order given; raises MigLayoutError naming the broken rule."""
    known = profiles(model)
    title = TITLES.get(model, model)
    for name in layout:
        if name not in known:
            raise MigLayoutError(
                f"{name!r} is not a MIG profile of the {title} (expected one of {', '.join(known)})"
            )
    counts = Counter(layout)
    for name, count in counts.items():
        limit = len(known[name].starts)
        if count > limit:
            raise MigLayoutError(f"{title}: at most {limit} x {name} ({known[name].rule()})")
    memory_slices, compute_slices = slice_counts(model)
    compute = sum(known[n].compute for n in layout)
    if compute > compute_slices:
        raise MigLayoutError(
            f"{title}: {' + '.join(layout)} needs {compute} compute slices; "
            f"a GPU has {compute_slices}"
        )
    order = sorted(range(len(layout)), key=lambda i: (-known[layout[i]].memory, i))
    starts: dict[int, int] = {}
    if not _fit(order, layout, known, starts, [False] * memory_slices):
        rules = "; ".join(known[n].rule() for n in sorted(counts, key=lambda n: -known[n].memory))
        raise MigLayoutError(
            f"{title}: {' + '.join(layout)} does not fit its {memory_slices} memory slices "
            f"({rules})"
        )
    return [Slice(known[name], starts[i]) for i, name in enumerate(layout)]


def _fit(
    order: list[int],
    layout: list[str],
    known: dict[str, Profile],
    starts: dict[int, int],
    used: list[bool],
) -> bool:
    """Backtracking: place the slices of `order` (biggest first) on free slices."""
    if not order:
        return True
    first, rest = order[0], order[1:]
    profile = known[layout[first]]
    for start in profile.starts:
        span = range(start, start + profile.memory)
        if any(used[s] for s in span):
            continue
        for s in span:
            used[s] = True
        starts[first] = start
        if _fit(rest, layout, known, starts, used):
            return True
        for s in span:
            used[s] = False
        del starts[first]
    return False


__all__ = [
    "COMPUTE_SLICES",
    "MEMORY_SLICES",
    "MODELS",
    "MigLayoutError",
    "Profile",
    "Slice",
    "compute_fraction",
    "is_mig_profile",
    "model_for",
    "place",
    "profiles",
    "several_slices_refusal",
    "slice_counts",
]
