"""The goodput simulator and the Young/Daly interval."""

from __future__ import annotations

import math

import pytest

from podium.sim.goodput import GoodputModel, llama3_mtbf_s, simulate, young_daly_interval_s


def model(**kw: float) -> GoodputModel:
    base = dict(
        work_s=36_000.0, mtbf_s=1e12, interval_s=600.0, checkpoint_s=10.0, detect_s=5, restart_s=30
    )
    base.update(kw)
    return GoodputModel(**base)


def test_without_failures_only_checkpoints_cost() -> None:
    r = simulate(model(), trials=5)
    # 60 segments, 59 checkpoints (none after the last one).
    assert r.failures == 0
    assert r.ettr == pytest.approx(36_000 / (36_000 + 59 * 10))


def test_failures_and_slow_recovery_cost_goodput() -> None:
    fast = simulate(model(mtbf_s=3600), trials=300, seed=1)
    slow = simulate(model(mtbf_s=3600, detect_s=1800), trials=300, seed=1)
    rare = simulate(model(mtbf_s=36_000), trials=300, seed=1)
    assert rare.ettr > fast.ettr > slow.ettr
    # Failures strike while the job runs, not while it is down: with the same seed the
    # slow recovery meets the same failures, and pays more for each.
    assert slow.failures == fast.failures and slow.wall_s > fast.wall_s


def test_young_daly_interval_is_near_the_best() -> None:
    mtbf, c = 3600.0, 30.0
    best = young_daly_interval_s(c, mtbf)
    assert best == pytest.approx(math.sqrt(2 * 30 * 3600))
    at = {
        t: simulate(model(mtbf_s=mtbf, checkpoint_s=c, interval_s=t), trials=400, seed=2).ettr
        for t in (best / 8, best, best * 8)
    }
    assert at[best] > at[best / 8] and at[best] > at[best * 8]


def test_llama3_rate() -> None:
    # 419 interruptions in 54 days on 16,384 GPUs: one every ~3.1 hours for the job.
    assert llama3_mtbf_s() / 3600 == pytest.approx(54 * 24 / 419)
    assert llama3_mtbf_s(8192) == pytest.approx(2 * llama3_mtbf_s())
