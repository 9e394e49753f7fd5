"""How right is "when will my job start?": replay a trace in the simulator and, at each
job's submission, ask the forecast (`podium.sim.forecast`, what `podium queue --start`
runs) when it will start; compare with when it really started in the replay.

The forecast sees what the daemon would: the snapshot at submission, running jobs
ending at their time limits (the trace's durations times `SimOptions.
time_limit_factor`: 1 is exact, above 1 is how users overestimate), the queue in
priority order. It cannot see jobs submitted later, which may overtake by priority or
by backfill, nor jobs ending before their limits, which start others earlier.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from podium.sched.model import Snapshot
from podium.sim.engine import SimOptions, policy_of, simulate
from podium.sim.forecast import forecast
from podium.sim.traces import TraceJob, TraceNode


@dataclass(frozen=True)
class Sample:
    """One job: when it was submitted, the start forecast then (None: N/A) and its real
    start in the replay."""

    job_id: int
    submit: float
    predicted: float | None
    real: float
    estimated: bool = False  # beyond the forecast's passes (forecast_bound), not planned


@dataclass(frozen=True)
class ErrorSummary:
    """Over the jobs that had a forecast: the absolute error (|real - predicted|)
    median, p90 and max in seconds, the median signed error (negative: it started
    earlier than forecast), the share forecast within 10 % of their real wait (or 60 s),
    and how many got no forecast."""

    jobs: int
    forecast: int
    no_forecast: int
    median_abs_s: float
    p90_abs_s: float
    max_abs_s: float
    median_signed_s: float
    within_10pct: float
    mean_wait_s: float


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile by nearest rank (0 <= q <= 1); nan for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def summarize(samples: list[Sample]) -> ErrorSummary:
    """The error figures of `samples` (see ErrorSummary)."""
    had = [s for s in samples if s.predicted is not None]
    signed = [s.real - s.predicted for s in had if s.predicted is not None]
    absolute = [abs(e) for e in signed]
    close = [
        abs(e) <= max(60.0, 0.1 * (s.real - s.submit)) for s, e in zip(had, signed, strict=True)
    ]
    return ErrorSummary(
        jobs=len(samples),
        forecast=len(had),
        no_forecast=len(samples) - len(had),
        median_abs_s=statistics.median(absolute) if absolute else float("nan"),
        p90_abs_s=percentile(absolute, 0.9),
        max_abs_s=max(absolute, default=float("nan")),
        median_signed_s=statistics.median(signed) if signed else float("nan"),
        within_10pct=sum(close) / len(close) if close else float("nan"),
        mean_wait_s=statistics.mean(s.real - s.submit for s in samples) if samples else 0.0,
    )


def error_row(policy: str, samples: list[Sample]) -> dict[str, float | int | str]:
    """One row of `podium sim --forecast-error`: the errors over every job and over the
    jobs that waited (a job that starts at once is easy to forecast), and apart for the
    starts the passes planned and the estimates beyond them."""
    every = summarize(samples)
    waited = summarize([s for s in samples if s.real > s.submit])
    planned = summarize([s for s in samples if s.predicted is not None and not s.estimated])
    beyond = summarize([s for s in samples if s.estimated])
    return {
        "policy": policy,
        "jobs": every.jobs,
        "waited": waited.jobs,
        "no_forecast": every.no_forecast,
        "median_abs_s": round(every.median_abs_s, 1),
        "p90_abs_s": round(every.p90_abs_s, 1),
        "waited_median_abs_s": round(waited.median_abs_s, 1),
        "waited_p90_abs_s": round(waited.p90_abs_s, 1),
        "waited_median_signed_s": round(waited.median_signed_s, 1),
        "waited_within_10pct": round(waited.within_10pct, 3),
        "waited_mean_wait_s": round(waited.mean_wait_s, 1),
        "planned": planned.jobs,
        "planned_median_abs_s": round(planned.median_abs_s, 1),
        "planned_p90_abs_s": round(planned.p90_abs_s, 1),
        "estimated": beyond.jobs,
        "estimated_median_abs_s": round(beyond.median_abs_s, 1),
        "estimated_p90_abs_s": round(beyond.p90_abs_s, 1),
    }


def forecast_errors(
    trace: list[TraceJob],
    nodes: list[TraceNode],
    policy_name: str,
    options: SimOptions,
    max_passes: int = 100,
    sample_every: int = 1,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Sample]:
    """Replay `trace` under `policy_name`, forecasting at submission every
    `sample_every`-th job (by submission order); one Sample per forecast job that
    started in the replay (`on_progress`: as `simulate` takes it)."""
    policy = policy_of(policy_name, options)
    order = {j.job_id: i for i, j in enumerate(sorted(trace, key=lambda j: j.submit_time))}
    predicted: dict[int, tuple[float, float | None, bool]] = {}

    def at_submit(snap: Snapshot, now: float, arrived: list[int]) -> None:
        wanted = [j for j in arrived if order[j] % sample_every == 0]
        if not wanted:
            return
        found = forecast(snap, now, policy, max_passes)
        for job_id in wanted:
            start = found.starts.get(job_id)
            if start is not None:
                predicted[job_id] = (now, start.start, False)
            else:
                estimate = found.beyond.estimates.get(job_id)
                predicted[job_id] = (now, estimate, estimate is not None)

    result = simulate(
        trace, nodes, policy_name, options, on_arrival=at_submit, on_progress=on_progress
    )
    samples = []
    for out in result.outcomes:
        got = predicted.get(out.job.job_id)
        if got is not None and out.first_start is not None:
            samples.append(Sample(out.job.job_id, got[0], got[1], out.first_start, got[2]))
    return samples


__all__ = ["ErrorSummary", "Sample", "error_row", "forecast_errors", "percentile", "summarize"]
