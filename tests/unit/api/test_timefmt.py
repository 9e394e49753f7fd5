from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.api.timefmt import parse_begin, parse_duration, parse_memory_mb
from podium.api.times import format_duration


@pytest.mark.parametrize(
    "text,seconds",
    [
        ("30", 1800),
        ("30:15", 1815),
        ("1:30:00", 5400),
        ("2-0", 172800),
        ("2-12", 216000),
        ("2-12:30", 217800),
        ("2-12:30:05", 217805),
        ("UNLIMITED", None),
        ("infinite", None),
    ],
)
def test_slurm_time_formats(text: str, seconds: int | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "1:2:3:4", "-5", "0", "1-a", "0:00"])
def test_bad_times(text: str) -> None:
    with pytest.raises(ValueError, match=r"UNLIMITED|positive"):
        parse_duration(text)


@given(st.integers(min_value=1, max_value=10 * 365 * 86400))
def test_format_then_parse_round_trips(seconds: int) -> None:
    text = format_duration(seconds)
    if "-" not in text and text.count(":") == 1:
        minutes, secs = text.split(":")
        assert int(minutes) * 60 + int(secs) == seconds
    else:
        assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text,mb",
    [("500", 500), ("500M", 500), ("4G", 4096), ("1T", 1048576), ("2048K", 2), ("4gb", 4096)],
)
def test_memory_sizes(text: str, mb: int) -> None:
    assert parse_memory_mb(text) == mb


@pytest.mark.parametrize("text", ["0", "lots", "4X", "-1G"])
def test_bad_memory(text: str) -> None:
    with pytest.raises(ValueError):
        parse_memory_mb(text)


def test_begin_times() -> None:
    now = dt.datetime(2026, 11, 21, 12, 0, 0).timestamp()
    assert parse_begin("now", now) == now
    assert parse_begin("now+60", now) == now + 60
    assert parse_begin("now+2hours", now) == now + 7200
    assert parse_begin("13:00", now) == now + 3600
    assert parse_begin("11:00", now) == now + 23 * 3600  # already past: tomorrow
    assert parse_begin("2026-11-22T12:00:00", now) == now + 86400
    with pytest.raises(ValueError, match="now\\+N"):
        parse_begin("tomorrowish", now)
