"""A running job's own word on how far it is (`podium progress DONE --of TOTAL`), and
when that says it will end (pure: the times are given).

A job reports `done` of `total` units of its choice (steps, samples, epochs). Its
rate is measured between its first report of the run and its newest one, so the time
it took to start (loading data, compiling) does not count, and a run resumed from a
checkpoint (which reports from the step it resumed at) is measured on its own. One
report says how far it is but not how fast: the end is estimated from the second
report on, made at least `MIN_SPAN_S` after the first. A report whose `done` went
back, or whose `total` changed, starts the measure again.

What a job says is its user's word, never trusted further than it can hurt: a rate that
puts the end more than `HORIZON_S` after the report (or past any time a clock can
show) gives no end at all, so every end that leaves here is finite and bounded."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

MIN_SPAN_S = 1.0  # two reports closer than this give no rate worth trusting
HORIZON_S = 366 * 86400.0  # an end further than this from the report is not believed


@dataclass(frozen=True)
class Progress:
    """What a job said of its progress in one run: the run's start time (`run_start`,
    which ties the reports to that run), `done` of `total` at `at`, and its first report
    of the run (`first_done` at `first_at`)."""

    run_start: float
    total: float
    first_done: float
    first_at: float
    done: float
    at: float

    @staticmethod
    def first(run_start: float, done: float, total: float, at: float) -> Progress:
        """A run's first report."""
        return Progress(run_start, total, done, at, done, at)

    def then(self, run_start: float, done: float, total: float, at: float) -> Progress:
        """This record after a newer report; a new run, a `done` that went back or a new
        `total` start the measure again."""
        if run_start != self.run_start or done < self.done or total != self.total:
            return Progress.first(run_start, done, total, at)
        return Progress(run_start, total, self.first_done, self.first_at, done, max(at, self.at))

    @property
    def fraction(self) -> float:
        """How much of its work is done, 0 to 1."""
        return min(1.0, self.done / self.total)

    def rate(self) -> float | None:
        """Units per second between its first and newest reports of the run (None until
        two reports at least MIN_SPAN_S apart show some work done)."""
        span = self.at - self.first_at
        if span < MIN_SPAN_S or self.done <= self.first_done:
            return None
        rate = (self.done - self.first_done) / span
        return rate if rate > 0 else None  # so little work it rounds to none

    def expected_end(self) -> float | None:
        """When the rest of its work is done at the rate measured (its newest report's
        time once all is done; None while the rate is unknown, or when it puts the end
        more than HORIZON_S after the newest report: always finite)."""
        if self.done >= self.total:
            return self.at
        rate = self.rate()
        if rate is None:
            return None
        left = (self.total - self.done) / rate
        return self.at + left if math.isfinite(left) and left <= HORIZON_S else None

    def record(self) -> dict[str, float | None]:
        """What `podium show` and the API give of it."""
        return {
            "done": self.done,
            "total": self.total,
            "fraction": round(self.fraction, 4),
            "reported_at": self.at,
            "rate_per_s": self.rate(),
            "expected_end": self.expected_end(),
        }


def progress_words(progress: dict[str, float | None], iso: Callable[[float], str | None]) -> str:
    """A progress record in words: "24 % (1200 of 5000), expected to end at TIME"."""
    done, total, fraction = progress["done"], progress["total"], progress["fraction"] or 0.0
    words = f"{100 * fraction:.0f} % ({done:g} of {total:g})"
    end = progress["expected_end"]
    if end is None:
        return words + ", its end is estimated from its next report"
    return words + f", expected to end at {iso(end)}"


__all__ = ["HORIZON_S", "MIN_SPAN_S", "Progress", "progress_words"]
