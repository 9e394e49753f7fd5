"""Stragglers: a rank of a running job whose steps take persistently longer than the
others' (pure: no I/O, the daemon passes what the ranks said).

In data-parallel training every rank waits for the slowest at each collective, so the
ranks' step periods are all alike; what a straggler shows is the time its step takes
*outside* the collectives (forward, backward, its data), which each rank reports
(`podium.run.rank_beats`: `STEP[.PHASE] SECONDS`, as examples/train.py writes it).

A rank is a straggler when its seconds are at least `factor` times the median of the
other ranks' and at least `floor_s` more than it, at `looks` looks in a row (one look a
health interval), each at a later step of that rank than the last: one slow step (a
checkpoint, a garbage collection, a moment without a CPU) seen again and again is not
one.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

FACTOR = 1.5
FLOOR_S = 0.02
LOOKS = 3


@dataclass(frozen=True)
class Straggler:
    """A rank named slow: its seconds, the others' median, how many looks in a row."""

    rank: int
    seconds: float
    others: float
    looks: int

    def words(self) -> str:
        """One line for `podium show` and the job's events."""
        ratio = self.seconds / self.others if self.others > 0 else float("inf")
        return (
            f"rank {self.rank}: {self.seconds:.3f} s a step outside collectives against "
            f"{self.others:.3f} s for the others ({ratio:.1f}x), {self.looks} looks in a row"
        )


def slowest(
    seconds: dict[int, float], factor: float = FACTOR, floor_s: float = FLOOR_S
) -> tuple[int, float, float] | None:
    """(rank, its seconds, the others' median) for the rank well above the others at
    this look; None when no rank is (or fewer than two ranks said)."""
    if len(seconds) < 2:
        return None
    rank = max(seconds, key=lambda r: (seconds[r], -r))
    others = statistics.median(s for r, s in seconds.items() if r != rank)
    mine = seconds[rank]
    if mine >= factor * others and mine - others >= floor_s:
        return rank, mine, others
    return None


@dataclass
class StragglerWatch:
    """Per job, the rank slow at the last looks and for how many in a row."""

    looks: int = LOOKS
    factor: float = FACTOR
    floor_s: float = FLOOR_S
    # job -> (the slow rank, looks in a row, its step at the last of them)
    _runs: dict[int, tuple[int, int, float]] = field(default_factory=dict)

    def look(
        self, job_id: int, seconds: dict[int, float], steps: dict[int, float] | None = None
    ) -> Straggler | None:
        """Take one look at `job_id`'s ranks (`steps`: where each rank is; a look at the
        slow rank's same step as the last counts once); the straggler once it has been
        the slow rank for `looks` looks in a row (and at every look after), else None."""
        found = slowest(seconds, self.factor, self.floor_s)
        if found is None:
            self._runs.pop(job_id, None)
            return None
        rank, mine, others = found
        step = (steps or {}).get(rank, float("nan"))
        last_rank, count, last_step = self._runs.get(job_id, (rank, 0, float("nan")))
        if last_rank != rank:
            count = 0
        elif step == last_step:  # the same step seen again: not another look
            return Straggler(rank, mine, others, count) if count >= self.looks else None
        count += 1
        self._runs[job_id] = (rank, count, step)
        return Straggler(rank, mine, others, count) if count >= self.looks else None

    def forget(self, keep: set[int]) -> None:
        """Drop the jobs not in `keep` (they no longer run)."""
        for job_id in [j for j in self._runs if j not in keep]:
            del self._runs[job_id]


__all__ = ["FACTOR", "FLOOR_S", "LOOKS", "Straggler", "StragglerWatch", "slowest"]
