"""Goodput sums: charged, lost by cause, useful, and their ratio, by account or user."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podium.api.goodput_sums import LOSS_CAUSES, goodput_rows


def _job(account: str, user: str, gpu_seconds: float, **lost: float) -> dict[str, object]:
    return {"account": account, "user": user, "gpu_seconds": gpu_seconds, "lost_gpu_seconds": lost}


def test_rows_by_account_then_a_total() -> None:
    jobs = [
        _job("vision", "amy", 100.0, preemption=10.0),
        _job("vision", "bob", 50.0, resize=5.0, fault=5.0),
        _job("nlp", "cy", 40.0),
    ]
    rows = goodput_rows(jobs, "account")
    assert [r["name"] for r in rows] == ["nlp", "vision", "TOTAL"]
    nlp, vision, total = rows
    assert nlp["goodput"] == 1.0 and nlp["lost_gpu_seconds"] == 0
    assert vision["jobs"] == 2 and vision["gpu_seconds"] == 150.0
    assert vision["lost_by_cause"] == {"preemption": 10.0, "resize": 5.0, "fault": 5.0}
    assert vision["useful_gpu_seconds"] == 130.0 and vision["goodput"] == round(130 / 150, 4)
    assert total["gpu_seconds"] == 190.0 and total["lost_gpu_seconds"] == 20.0
    assert total["goodput"] == round(170 / 190, 4)


def test_by_user_and_nothing_charged() -> None:
    rows = goodput_rows([_job("a", "amy", 0.0), {"account": "a", "user": "bob"}], "user")
    assert [r["name"] for r in rows] == ["amy", "bob", "TOTAL"]
    assert all(r["goodput"] is None for r in rows)  # nothing charged: no ratio, not 0 or 1


def test_no_jobs_is_a_total_of_nothing() -> None:
    (total,) = goodput_rows([], "user")
    assert total["jobs"] == 0 and total["goodput"] is None
    assert set(total["lost_by_cause"]) == set(LOSS_CAUSES)


def test_an_unknown_grouping_is_refused() -> None:
    with pytest.raises(ValueError, match="expected one of account, user"):
        goodput_rows([], "qos")


seconds = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(st.lists(st.tuples(st.sampled_from("abc"), seconds, seconds, seconds), max_size=20))
def test_the_total_is_the_sum_of_the_rows(draws: list[tuple[str, float, float, float]]) -> None:
    jobs = [_job(a, "u", charged + lost, preemption=lost, fault=more) for a, charged, lost, more
            in draws]  # fmt: skip
    *rows, total = goodput_rows(jobs, "account")
    assert total["jobs"] == sum(r["jobs"] for r in rows) == len(jobs)
    assert total["gpu_seconds"] == pytest.approx(sum(r["gpu_seconds"] for r in rows), abs=0.01)
    for row in (*rows, total):
        assert 0 <= row["useful_gpu_seconds"] <= row["gpu_seconds"] + 1e-6
        assert row["goodput"] is None or 0 <= row["goodput"] <= 1
