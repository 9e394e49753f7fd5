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


def test_a_spare_takes_a_confined_failure_and_no_work_is_lost() -> None:
    # Every failure confined, spares never run out: nothing is trained twice, and each
    # failure costs only detection and the replacement.
    spared = model(mtbf_s=3600, spares=1, confined=1.0, replace_s=10.0, refill_s=0.0)
    r = simulate(spared, trials=200, seed=3)
    assert r.replaced == r.failures > 0
    expected = 36_000 + 59 * 10 + r.failures * (5 + 10)  # work, checkpoints, pauses
    # ... and a checkpoint a failure cut short is written again (10 s at the most)
    assert expected <= r.wall_s <= expected + r.failures * 10
    restarted = simulate(model(mtbf_s=3600), trials=200, seed=3)
    assert r.ettr > restarted.ettr


def test_without_spares_or_confined_failures_it_is_todays_model() -> None:
    base = simulate(model(mtbf_s=3600), trials=100, seed=4)
    for kw in ({"spares": 0, "confined": 1.0}, {"spares": 2, "confined": 0.0}):
        same = simulate(model(mtbf_s=3600, replace_s=1.0, **kw), trials=100, seed=4)
        assert (same.wall_s, same.failures, same.replaced) == (base.wall_s, base.failures, 0)


def test_an_empty_pool_falls_back_to_a_restart() -> None:
    # One spare that takes a day to come back: after the first replacement in a run,
    # confined failures restart the job again.
    slow_refill = model(mtbf_s=1800, spares=1, confined=1.0, replace_s=1.0, refill_s=86_400)
    r = simulate(slow_refill, trials=200, seed=5)
    assert 0 < r.replaced <= 1 and r.failures > r.replaced
    quick_refill = simulate(model(mtbf_s=1800, spares=1, confined=1.0, replace_s=1.0,
                                  refill_s=60), trials=200, seed=5)  # fmt: skip
    assert quick_refill.replaced > r.replaced and quick_refill.ettr > r.ettr


def test_held_ettr_charges_the_spares() -> None:
    from podium.sim.goodput import held_ettr

    assert held_ettr(0.99, 16_384, 0) == 0.99
    assert held_ettr(0.99, 16_384, 16_384) == pytest.approx(0.495)
