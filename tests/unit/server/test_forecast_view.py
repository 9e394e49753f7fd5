"""The shared forecast: made once per change of the cluster, not once per request;
bounded in passes and in time; finite whatever a job reports of its progress."""

from __future__ import annotations

import json

from podium.server.forecast_view import ForecastBook
from podium.sim.forecast import forecast
from tests.unit.server.harness import ME, Cluster


class Ticks:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _busy(c: Cluster) -> tuple[int, int]:
    """One running job on both GPUs (a 60-minute limit) and one waiting behind it."""
    running = c.submit("--gpus=2", "-t", "60")
    c.reactor.run_pass()
    waiting = c.submit("--gpus=1", "-t", "10")
    c.reactor.run_pass()
    return running, waiting


def test_one_forecast_serves_every_request_until_the_cluster_changes(c: Cluster) -> None:
    running, waiting = _busy(c)
    ticks = Ticks()
    book = ForecastBook(c.reactor, ticks=ticks)
    first = book.records(only=waiting)["jobs"]
    assert first[0]["expected_start_epoch"] == 100.0 + 3600
    for _ in range(20):  # a user looping on `podium show`
        ticks.now += 0.5
        assert book.records(only=waiting)["jobs"] == first
    assert book.made_count == 1
    c.submit("--gpus=1", "-t", "5")  # a change a pass sees
    c.reactor.run_pass()
    book.records()
    assert book.made_count == 2
    c.control.progress(ME, running, 10, 100)  # a report changes the forecast too
    book.records()
    assert book.made_count == 3
    ticks.now += 31  # and age: priorities move with time
    book.records()
    assert book.made_count == 4


def test_a_costly_forecast_is_not_made_again_sooner_than_its_cost_allows(c: Cluster) -> None:
    _, waiting = _busy(c)
    ticks = Ticks()
    book = ForecastBook(c.reactor, ticks=ticks)
    book.records()
    made = book.current()
    object.__setattr__(made, "cost", 2.0)  # as if it took 2 s
    c.submit("--gpus=1", "-t", "5")
    c.reactor.run_pass()
    ticks.now += 7  # under 4 x its cost: the kept one answers
    assert book.records(only=waiting)["jobs"][0]["job_id"] == waiting
    assert book.made_count == 1
    ticks.now += 2
    book.records()
    assert book.made_count == 2


def test_the_forecast_stops_when_out_of_time(c: Cluster) -> None:
    for _ in range(3):
        c.submit("--gpus=2", "-t", "10")
    c.reactor.run_pass()
    snap, now = c.reactor.snapshot_now()
    whole = forecast(snap, now, c.reactor.policy)
    cut = forecast(snap, now, c.reactor.policy, out_of_time=lambda: True)
    assert whole.passes == 3 and cut.passes == 1  # one pass always runs
    assert len(cut.starts) < len(whole.starts)


def test_absurd_progress_leaves_every_forecast_finite(c: Cluster) -> None:
    """Issue 43: a job with no time limit reporting 0 then 1e-290 of 1e15 made the
    forecast of every pending job fail (OverflowError, 500s, the page stuck on
    loading)."""
    running = c.submit("--gpus=2")  # no time limit
    c.reactor.run_pass()
    waiting = c.submit("--gpus=1", "-t", "10")
    c.reactor.run_pass()
    times = iter([100.0, 102.0])
    c.reactor.clock = lambda: next(times, 102.0)
    c.control.progress(ME, running, 0, 1e15)
    c.control.progress(ME, running, 1e-290, 1e15)
    book = ForecastBook(c.reactor)
    found = book.records()
    json.dumps(found, allow_nan=False)  # no infinity, no NaN anywhere
    [job] = found["jobs"]
    assert job["job_id"] == waiting and job["expected_start"] is None
    assert "no time limit" in job["blockers"][0]["text"]
