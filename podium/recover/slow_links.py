"""A host with a slow link inside a running job, from what its ranks measured (pure).

Every so many steps, each rank of the job times what it receives from the rank before
it in a ring (examples/train.py's link check: 4 MiB after a barrier). A host whose link
is slow (a bad cable or NIC, a port gone to a lower speed, a congested uplink) slows
both what its rank receives (its way in) and what the next rank receives from it (its
way out): two slow links in a row point at the rank between them. One slow link alone
could be either end, and names nobody here.

A link is slow at a look when its seconds are at least FACTOR times the fastest link's
and at least FLOOR_S more than it; a rank is named after LOOKS looks in a row, each at
a later step. The fastest link is the baseline, not the median: with three ranks, two
of the three links touch the slow host. Measured for false positives in
bench/slow_host.py (docs/elastic.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

FACTOR = 3.0
FLOOR_S = 0.05
LOOKS = 3


@dataclass(frozen=True)
class SlowHost:
    """A rank whose host's links are slow: the seconds into it and out of it, the
    fastest link's, and the looks in a row."""

    rank: int
    into_s: float
    out_s: float
    fastest_s: float
    looks: int

    def words(self) -> str:
        return (
            f"rank {self.rank}'s links took {self.into_s:.3f} s in and {self.out_s:.3f} s "
            f"out against {self.fastest_s:.3f} s for the fastest, {self.looks} looks in a row"
        )


def slow_rank(
    seconds: dict[int, float], factor: float = FACTOR, floor_s: float = FLOOR_S
) -> tuple[int, float, float, float] | None:
    """(rank, seconds into it, seconds out of it, the fastest link's) for the one rank
    both of whose links are slow at this look; None when none is, when two are (no one
    host explains it), or when fewer than three ranks said (two ranks share both
    links). `seconds[r]`: what rank r took to receive from rank r-1."""
    world = len(seconds)
    if world < 3 or sorted(seconds) != list(range(world)):
        return None
    fastest = min(seconds.values())
    slow = {r for r, s in seconds.items() if s >= factor * fastest and s - fastest >= floor_s}
    named = [r for r in range(world) if r in slow and (r + 1) % world in slow]
    if len(named) != 1:
        return None
    rank = named[0]
    return rank, seconds[rank], seconds[(rank + 1) % world], fastest


@dataclass
class LinkWatch:
    """The rank named at the last looks, for how many in a row, at which step."""

    looks: int = LOOKS
    factor: float = FACTOR
    floor_s: float = FLOOR_S
    _run: tuple[int, int, float] | None = field(default=None)  # (rank, looks, step)

    def look(self, step: float, seconds: dict[int, float]) -> SlowHost | None:
        """One look at one link check (every rank's seconds at `step`); the slow host
        once named `looks` times in a row at later steps, else None."""
        found = slow_rank(seconds, self.factor, self.floor_s)
        if found is None:
            self._run = None
            return None
        rank, into, out, fastest = found
        if self._run is not None and self._run[0] == rank:
            if step <= self._run[2]:
                return None  # the same check seen again
            count = self._run[1] + 1
        else:
            count = 1
        self._run = (rank, count, step)
        return SlowHost(rank, into, out, fastest, count) if count >= self.looks else None

    def forget(self) -> None:
        """A new world (after a resize): nothing seen yet."""
        self._run = None


__all__ = ["FACTOR", "FLOOR_S", "LOOKS", "LinkWatch", "SlowHost", "slow_rank"]
