"""Fair-share usage decays with a half-life: the one formula the store (which keeps
usage) and the scheduler (which turns it into factors) share. Standard library only."""

from __future__ import annotations

import math


def decay(usage: float, elapsed_s: float, half_life_s: float) -> float:
    """Usage after `elapsed_s` of exponential decay with the given half-life."""
    if half_life_s <= 0:
        return usage
    return usage * math.pow(2.0, -max(0.0, elapsed_s) / half_life_s)


def charged(
    value: float | None, updated: float, amount: float, now: float, half_life_s: float
) -> float:
    """An (account, user)'s usage after charging `amount` at `now`, when it stood at
    `value` (None: never charged) as of `updated`."""
    return amount if value is None else amount + decay(value, now - updated, half_life_s)


__all__ = ["charged", "decay"]
