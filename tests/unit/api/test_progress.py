"""A job's reported progress gives its end from the second report of a run: the rate
between its first and newest reports; a new run, work that went back or a new total
start the measure again; an end is always finite and within the horizon, and every
formatter of times takes any float."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.api.progress import HORIZON_S, MIN_SPAN_S, Progress, progress_words
from podium.api.times import format_duration, iso
from podium.sched.blockers import within


def test_one_report_says_how_far_but_not_when() -> None:
    first = Progress.first(run_start=0, done=100, total=1000, at=60)
    assert first.fraction == 0.1 and first.rate() is None and first.expected_end() is None


def test_the_rate_between_reports_gives_the_end() -> None:
    got = Progress.first(0, 100, 1000, at=60).then(0, 300, 1000, at=160)
    assert got.rate() == 2.0  # 200 steps in 100 s: the start-up before the first not counted
    assert got.expected_end() == 160 + 700 / 2.0
    assert got.then(0, 1000, 1000, at=500).expected_end() == 500  # all done: ends now


def test_a_new_run_less_work_or_a_new_total_start_again() -> None:
    got = Progress.first(0, 100, 1000, at=60).then(0, 300, 1000, at=160)
    assert got.then(200, 300, 1000, at=260).rate() is None  # requeued: a new run
    assert got.then(0, 250, 1000, at=260).rate() is None  # resumed from a checkpoint
    assert got.then(0, 400, 2000, at=260).rate() is None  # the job's plan changed


def test_reports_too_close_or_without_work_give_no_rate() -> None:
    first = Progress.first(0, 100, 1000, at=60)
    assert first.then(0, 200, 1000, at=60 + MIN_SPAN_S / 2).rate() is None
    assert first.then(0, 100, 1000, at=600).expected_end() is None


@given(
    st.floats(0, 1e6), st.floats(1, 1e6), st.floats(0.0, 1.0), st.floats(0.0, 1.0),
    st.floats(MIN_SPAN_S, 1e5),
)  # fmt: skip
def test_the_end_is_never_before_the_newest_report(
    start: float, total: float, a: float, b: float, span: float
) -> None:
    lo, hi = sorted((a * total, b * total))
    got = Progress.first(start, lo, total, at=start + 1).then(start, hi, total, at=start + 1 + span)
    end = got.expected_end()
    assert end is None or end >= got.at
    assert 0.0 <= got.fraction <= 1.0


def test_in_words() -> None:
    got = Progress.first(0, 100, 1000, at=60).then(0, 300, 1000, at=160).record()
    assert progress_words(got, lambda t: f"T{t:g}") == "30 % (300 of 1000), expected to end at T510"
    once = Progress.first(0, 1, 4, at=1).record()
    assert progress_words(once, str).endswith("its end is estimated from its next report")


def test_an_absurd_rate_gives_no_end_and_every_end_is_finite() -> None:
    """Issue 43: done 0 then 1e-290 (or 5e-324) of 1e15 put the end at infinity (or
    1e305 s away), and the forecast of every pending job answered 500."""
    for tiny in (1e-290, 5e-324, 1e-3):
        got = Progress.first(0, 0, 1e15, at=10).then(0, tiny, 1e15, at=20)
        assert got.expected_end() is None, tiny
        assert got.record()["expected_end"] is None
    near = Progress.first(0, 0, 100, at=10).then(0, 1, 100, at=20)
    assert near.expected_end() == 20 + 99 * 10  # within the horizon: believed


@given(
    st.floats(0, 1e9), st.floats(min_value=5e-324, max_value=1e15), st.floats(0.0, 1.0),
    st.floats(0.0, 1.0), st.floats(MIN_SPAN_S, 1e7),
)  # fmt: skip
def test_every_end_is_finite_and_within_the_horizon(
    start: float, total: float, a: float, b: float, span: float
) -> None:
    lo, hi = sorted((a * total, b * total))
    got = Progress.first(start, lo, total, at=start + 1).then(start, hi, total, at=start + 1 + span)
    end = got.expected_end()
    assert end is None or got.at <= end <= got.at + HORIZON_S


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_the_formatters_take_any_float(value: float) -> None:
    """Every time shown (ISO, "in 5 min", squeue's durations) is total over floats."""
    shown = iso(value)
    assert shown is None or shown[:4].isdigit()
    assert within(value).startswith("in ")
    assert format_duration(value)
