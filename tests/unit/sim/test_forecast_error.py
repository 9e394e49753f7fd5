"""The forecast's error over a trace: at each submission the forecast is asked when the
job starts, and compared with its real start in the replay. With exact time limits and
nothing submitted later to overtake, it is exact; with limits twice the runtime, jobs
start earlier than forecast. The Tiresias figures of docs/scheduling.md are checked
here, so CI makes them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from podium.sim.engine import SimOptions, uniform_nodes
from podium.sim.forecast_error import Sample, error_row, forecast_errors, percentile, summarize
from podium.sim.traces import TraceJob, read_tiresias

DATA = Path(__file__).resolve().parent / "data"  # ../shared/traces' Tiresias 60, copied
NODES = uniform_nodes(1, 4, 8, 16000)


def test_a_job_behind_another_is_forecast_exactly_with_exact_limits() -> None:
    trace = [TraceJob(1, 0.0, 4, 100.0), TraceJob(2, 10.0, 2, 50.0), TraceJob(3, 20.0, 4, 10.0)]
    samples = {s.job_id: s for s in forecast_errors(trace, NODES, "fifo-backfill", SimOptions())}
    assert (samples[2].submit, samples[2].predicted, samples[2].real) == (10.0, 100.0, 100.0)
    assert samples[3].predicted == samples[3].real == 150.0
    late = forecast_errors(trace, NODES, "fifo-backfill", SimOptions(time_limit_factor=2.0))
    by_id = {s.job_id: s for s in late}
    assert by_id[2].predicted == 200.0 and by_id[2].real == 100.0  # ended at half its limit


def test_summary_figures() -> None:
    samples = [Sample(1, 0, 10, 10), Sample(2, 0, 100, 40), Sample(3, 0, None, 5)]
    got = summarize(samples)
    assert (got.jobs, got.forecast, got.no_forecast) == (3, 2, 1)
    assert (got.median_abs_s, got.max_abs_s, got.median_signed_s) == (30.0, 60.0, -30.0)
    assert percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9) == 9


def test_the_tiresias_figures_of_docs_scheduling() -> None:
    trace = read_tiresias(DATA / "tiresias_60_job.csv")
    nodes = uniform_nodes(4, 4, 40, 256000)
    exact = error_row("fifo-backfill", forecast_errors(trace, nodes, "fifo-backfill", SimOptions()))
    assert exact["no_forecast"] == 0 and exact["waited"] == 25
    assert exact["waited_median_abs_s"] == 0.0 and exact["waited_within_10pct"] >= 0.9
    doubled = SimOptions(time_limit_factor=2.0)
    late = error_row("backfill", forecast_errors(trace, nodes, "backfill", doubled))
    assert float(late["waited_median_signed_s"]) < -60  # they start well before forecast


def test_progress_reports_take_the_limits_slack_out_of_the_forecast() -> None:
    trace = [TraceJob(1, 0.0, 4, 100.0), TraceJob(2, 10.0, 2, 50.0)]
    told = SimOptions(time_limit_factor=2.0, progress_after_s=5.0)  # known 5 s into a run
    (sample,) = [s for s in forecast_errors(trace, NODES, "fifo-backfill", told) if s.job_id == 2]
    assert sample.predicted == sample.real == 100.0  # not 200: job 1's rate says 100
    early = SimOptions(time_limit_factor=2.0, progress_after_s=20.0)  # not known yet at 10 s
    (sample,) = [s for s in forecast_errors(trace, NODES, "fifo-backfill", early) if s.job_id == 2]
    assert sample.predicted == 200.0
    trace60 = read_tiresias(DATA / "tiresias_60_job.csv")
    nodes = uniform_nodes(4, 4, 40, 256000)
    rows = {
        after: error_row(
            "fifo-backfill",
            forecast_errors(trace60, nodes, "fifo-backfill", replace(told, progress_after_s=after)),
        )
        for after in (None, 60.0)
    }  # docs/scheduling.md's rows: 124 s median without reports, 27 s with them
    assert rows[None]["waited_median_abs_s"] == 124.0
    assert rows[60.0]["waited_median_abs_s"] == 27.0
