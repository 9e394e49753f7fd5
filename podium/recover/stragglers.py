"""Stragglers: a rank of a running job whose steps take persistently longer than the
others' (pure: no I/O, the daemon passes what the ranks said and the time).

In data-parallel training every rank waits for the slowest at each collective, so the
ranks' step periods are all alike; what a straggler shows is the time its step takes
*outside* the collectives (forward, backward, its data), which each rank reports
(`podium.run.rank_beats`: `STEP[.PHASE] SECONDS`, as examples/train.py writes it).

A look reads one step of each rank (its last), so one look proves nothing: a rank
without a CPU for a moment, a garbage collection or a slow batch is slow at that step
only. The watch keeps the looks of the last `window_s` seconds (at least `looks` of
them; only looks at which some rank had moved on count, so one slow step seen again
and again counts once) and takes each rank's median over them. A rank is a straggler
when its median is at least `factor` times the median of the other ranks' medians and
at least `floor_s` more than it, once the looks span `window_s`: slow at most looks
over that long, not at a few looks in a row. (At the daemon's default interval of 30 s
that is the median of 3 looks; a health interval of a fraction of a second, as tests
use, made "3 looks in a row" a fraction of a second, and two ranks sharing two busy
CPUs were once told apart by it.)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

FACTOR = 1.5
FLOOR_S = 0.02
LOOKS = 3
WINDOW_S = 10.0
# kept per job at most, the oldest dropped: the medians are taken under the daemon's lock
# at every look, over at most this many looks of up to rank_beats.MAX_ENTRIES ranks
MAX_LOOKS = 64


@dataclass(frozen=True)
class Straggler:
    """A rank named slow: its median seconds, the others' median, over how many looks
    and how many seconds."""

    rank: int
    seconds: float
    others: float
    looks: int
    span_s: float

    def words(self) -> str:
        """One line for `podium show` and the job's events."""
        ratio = self.seconds / self.others if self.others > 0 else float("inf")
        return (
            f"rank {self.rank}: {self.seconds:.3f} s a step outside collectives against "
            f"{self.others:.3f} s for the others ({ratio:.1f}x), the median of "
            f"{self.looks} looks over {self.span_s:.0f} s"
        )


def slowest(
    seconds: dict[int, float], factor: float = FACTOR, floor_s: float = FLOOR_S
) -> tuple[int, float, float] | None:
    """(rank, its seconds, the others' median) for the rank well above the others;
    None when no rank is (or fewer than two ranks said)."""
    if len(seconds) < 2:
        return None
    rank = max(seconds, key=lambda r: (seconds[r], -r))
    others = statistics.median(s for r, s in seconds.items() if r != rank)
    mine = seconds[rank]
    if mine >= factor * others and mine - others >= floor_s:
        return rank, mine, others
    return None


@dataclass(frozen=True)
class _Look:
    when: float
    seconds: dict[int, float]
    steps: dict[int, float] | None


@dataclass
class StragglerWatch:
    """Per job, the looks of the last `window_s` seconds (module docstring)."""

    looks: int = LOOKS
    window_s: float = WINDOW_S
    factor: float = FACTOR
    floor_s: float = FLOOR_S
    _seen: dict[int, list[_Look]] = field(default_factory=dict)
    _generation: dict[int, int] = field(default_factory=dict)  # job -> its replacements

    def look(
        self,
        job_id: int,
        now: float,
        seconds: dict[int, float],
        steps: dict[int, float] | None = None,
        generation: int = 0,
    ) -> Straggler | None:
        """Take one look at `job_id`'s ranks at time `now` (`seconds`: each rank's last
        step's seconds; `steps`: where each rank is, and a look at which no rank moved
        on adds nothing; `generation`: how many of its replicas were replaced so far, a
        new one starting the window afresh, since a replaced rank is another process on
        another GPU and its first steps after healing are no sign of a slow one); the
        straggler over the window, or None (no rank slow, or the looks do not yet span
        `window_s`)."""
        if self._generation.get(job_id, 0) != generation:
            self._generation[job_id] = generation
            self._seen.pop(job_id, None)
        seen = self._seen.setdefault(job_id, [])
        if not seen or steps is None or steps != seen[-1].steps:
            seen.append(_Look(now, dict(seconds), dict(steps) if steps is not None else None))
        while len(seen) > self.looks and (
            seen[1].when <= now - self.window_s or len(seen) > MAX_LOOKS
        ):
            seen.pop(0)
        span = now - seen[0].when
        if len(seen) < self.looks or (span < self.window_s and len(seen) < MAX_LOOKS):
            return None
        said: dict[int, list[float]] = {}
        for past in seen:
            for rank, s in past.seconds.items():
                said.setdefault(rank, []).append(s)
        found = slowest({r: statistics.median(s) for r, s in said.items()}, self.factor,
                        self.floor_s)  # fmt: skip
        if found is None:
            return None
        rank, mine, others = found
        return Straggler(rank, mine, others, len(seen), span)

    def forget(self, keep: set[int]) -> None:
        """Drop the jobs not in `keep` (they no longer run)."""
        for job_id in [j for j in self._seen if j not in keep]:
            del self._seen[job_id]
            self._generation.pop(job_id, None)


__all__ = ["FACTOR", "FLOOR_S", "LOOKS", "WINDOW_S", "Straggler", "StragglerWatch", "slowest"]
