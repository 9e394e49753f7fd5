"""Stragglers: the rank whose steps stay slow against the others' median is named, a
slow step alone is not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.recover.stragglers import MAX_LOOKS, Straggler, StragglerWatch, slowest


def test_the_slow_rank_is_named_against_the_median_of_the_others() -> None:
    assert slowest({0: 0.10, 1: 0.31, 2: 0.11, 3: 0.09}) == (1, 0.31, 0.10)
    assert slowest({0: 0.10, 1: 0.14, 2: 0.11}) is None  # 1.3x: within the spread
    assert slowest({0: 0.001, 1: 0.010}) is None  # 10x but 9 ms: below the floor
    assert slowest({0: 0.5}) is None  # one rank has no others


def test_a_rank_is_a_straggler_once_its_median_over_the_window_is_slow() -> None:
    watch = StragglerWatch(looks=3, window_s=10)
    slow = {0: 0.1, 1: 0.4}
    assert watch.look(7, 0, slow) is None and watch.look(7, 5, slow) is None
    assert watch.look(7, 9, slow) is None  # three looks, but over 9 s only
    named = watch.look(7, 10, slow)
    assert named == Straggler(1, 0.4, 0.1, 4, 10)
    assert named.words() == (
        "rank 1: 0.400 s a step outside collectives against 0.100 s for the others "
        "(4.0x), the median of 4 looks over 10 s"
    )
    assert watch.look(7, 12, {0: 0.1, 1: 0.1}) is not None  # one fast look: still slow
    for t in (14, 16, 18):
        watch.look(7, t, {0: 0.1, 1: 0.1})
    assert watch.look(7, 20, {0: 0.1, 1: 0.1}) is None  # it caught up: most looks fast
    watch.forget(set())
    assert watch.look(7, 30, slow) is None  # forgotten with its job


def test_a_moment_of_slow_looks_is_not_a_straggler() -> None:
    """Rank 0 slow at three looks in a row, a fraction of a second apart, and fast at the
    others of the window (what two ranks sharing two busy CPUs once showed), is not
    named; the old rule of three looks in a row named it."""
    watch = StragglerWatch(looks=3, window_s=10)
    for k in range(60):
        t = k * 0.2
        seconds = {0: 0.126, 1: 0.065} if 20 <= k < 23 else {0: 0.065, 1: 0.066}
        assert watch.look(4, t, seconds, {0: k, 1: k}) is None, t


def test_one_slow_step_seen_again_is_not_a_straggler() -> None:
    """A rank stuck in one slow step (a checkpoint, no CPU for a moment) is seen slow at
    every look, but at the same step: it counts once."""
    watch = StragglerWatch(looks=3, window_s=10)
    for t, step in ((0, 37), (1, 38), (2, 39)):
        watch.look(3, t, {0: 0.1, 1: 0.1}, {0: step + 0.2, 1: step})
    for t in range(3, 30):
        assert watch.look(3, t, {0: 0.1, 1: 0.4}, {0: 40.2, 1: 40.0}) is None
    named = watch.look(3, 30, {0: 0.1, 1: 0.4}, {0: 41.2, 1: 41.0})
    assert named == Straggler(1, 0.4, 0.1, 3, 28)  # slow at two later steps of three
    assert watch.look(3, 31, {0: 0.1, 1: 0.4}, {0: 41.2, 1: 41.0}) == Straggler(
        1, 0.4, 0.1, 3, 29
    )  # still named, not counted on


def test_a_very_short_interval_keeps_a_bounded_window() -> None:
    watch = StragglerWatch(looks=3, window_s=10)
    for k in range(MAX_LOOKS + 50):
        found = watch.look(5, k * 0.01, {0: 0.1, 1: 0.4})
    assert found is not None and found.looks == MAX_LOOKS


@given(st.dictionaries(st.integers(0, 63), st.floats(0.05, 0.2), min_size=2, max_size=64))
def test_ranks_within_a_third_of_each_other_never_make_a_straggler(
    seconds: dict[int, float],
) -> None:
    low = min(seconds.values())
    alike = {r: min(s, low * 1.33) for r, s in seconds.items()}
    assert slowest(alike) is None


def test_a_replacement_starts_the_window_afresh() -> None:
    """Issue 63, item 5: rank 1 slow before a replacement (it was failing) and its
    replacement's first step slow (it healed from a peer) made looks on both sides of
    the replacement name it 10 s after; a replacement starts the window again."""
    watch = StragglerWatch(looks=3, window_s=10)
    slow = {0: 0.1, 1: 0.4}
    for k, t in enumerate((0, 5, 9)):
        assert watch.look(7, t, slow, {0: k, 1: k}, generation=0) is None
    assert watch.look(7, 10, slow, {0: 3, 1: 3}, generation=1) is None  # replaced
    for k, t in enumerate((12, 15, 19), start=4):
        assert watch.look(7, t, {0: 0.1, 1: 0.1}, {0: k, 1: k}, generation=1) is None
    assert watch.look(7, 20, slow, {0: 7, 1: 7}, generation=1) is None  # mostly fast
    mixed = StragglerWatch(looks=3, window_s=10)  # the same looks, one window: named
    for k, t in enumerate((0, 5, 9)):
        mixed.look(7, t, slow, {0: k, 1: k})
    assert mixed.look(7, 10, slow, {0: 3, 1: 3}) is not None
