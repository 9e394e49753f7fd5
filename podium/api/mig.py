"""MIG profiles and their placement rules, per GPU model, and the check of a layout
against them (shared by the config, the inventory and the scheduler).

A MIG-capable GPU has 8 memory slices and 7 compute slices. Each profile takes a
fixed number of memory slices and may start only at some of them: on an H100 80GB,
1g.10gb x7 at 0-6, 1g.20gb x4 at 0/2/4/6, 2g.20gb x3 at 0/2/4, 3g.40gb x2 at 0/4,
4g.40gb at 0, 7g.80gb at 0 (what `nvidia-smi mig -lgipp` lists, and what a real H100
showed; DESIGN.md). The models differ only in the profiles' memory sizes, so one
table of shapes serves them all.

`place(model, profiles)` finds where a layout's slices can go (biggest first, each at
its lowest free start, backtracking: "all-balanced", 3g.40gb + 2g.20gb + 2 x 1g.10gb,
fits only with the 3g.40gb at 4), or raises MigLayoutError with one line naming the
rule the layout breaks. Pure: no NVML, no I/O.
"""

from __future__ import annotations

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
MODELS: dict[str, tuple[str, ...]] = {
    "a100-40gb": ("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "a100-80gb": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "h100-80gb": ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "h100-94gb": ("1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"),
    "h200-141gb": ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
}
TITLES = {
    "a100-40gb": "A100 40GB",
    "a100-80gb": "A100 80GB",
    "h100-80gb": "H100 80GB",
    "h100-94gb": "H100 NVL 94GB",
    "h200-141gb": "H200 141GB",
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
    return None


def profiles(model: str) -> dict[str, Profile]:
    """The profiles of `model`, by name, smallest first."""
    names = MODELS[model]
    return {
        name: Profile(name, compute, memory, starts)
        for name, (compute, memory, starts) in zip(names, SHAPES, strict=True)
    }


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
    compute = sum(known[n].compute for n in layout)
    if compute > COMPUTE_SLICES:
        raise MigLayoutError(
            f"{title}: {' + '.join(layout)} needs {compute} compute slices; "
            f"a GPU has {COMPUTE_SLICES}"
        )
    order = sorted(range(len(layout)), key=lambda i: (-known[layout[i]].memory, i))
    starts: dict[int, int] = {}
    if not _fit(order, layout, known, starts, [False] * MEMORY_SLICES):
        rules = "; ".join(known[n].rule() for n in sorted(counts, key=lambda n: -known[n].memory))
        raise MigLayoutError(
            f"{title}: {' + '.join(layout)} does not fit its {MEMORY_SLICES} memory slices "
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
    "model_for",
    "place",
    "profiles",
]
