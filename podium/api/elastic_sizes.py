"""The sizes an elastic job may run at (`--elastic=MIN:MAX[:STEP]`), and the largest
of them that fits. Standard library only: the Slurm backend's elastic keeper, the
scheduler and the Kubernetes controller share it."""

from __future__ import annotations

from collections.abc import Iterable


def elastic_sizes(low: int, high: int, step: int) -> list[int]:
    """Every size an elastic job may run at, largest first: MIN, MIN + STEP, ... up to
    MAX, and MAX itself."""
    return sorted({*range(low, high + 1, step), high}, reverse=True)


def largest_fitting(sizes: Iterable[int], most: int) -> int | None:
    """The largest of `sizes` no larger than `most` (None: none is)."""
    return max((s for s in sizes if s <= most), default=None)


__all__ = ["elastic_sizes", "largest_fitting"]
