"""Stragglers: the rank whose steps stay slow against the others' median is named, a
slow step alone is not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.recover.stragglers import Straggler, StragglerWatch, slowest


def test_the_slow_rank_is_named_against_the_median_of_the_others() -> None:
    assert slowest({0: 0.10, 1: 0.31, 2: 0.11, 3: 0.09}) == (1, 0.31, 0.10)
    assert slowest({0: 0.10, 1: 0.14, 2: 0.11}) is None  # 1.3x: within the spread
    assert slowest({0: 0.001, 1: 0.010}) is None  # 10x but 9 ms: below the floor
    assert slowest({0: 0.5}) is None  # one rank has no others


def test_a_rank_is_a_straggler_only_after_looks_in_a_row() -> None:
    watch = StragglerWatch(looks=3)
    slow = {0: 0.1, 1: 0.4}
    assert watch.look(7, slow) is None and watch.look(7, slow) is None
    named = watch.look(7, slow)
    assert named == Straggler(1, 0.4, 0.1, 3)
    assert named.words() == (
        "rank 1: 0.400 s a step outside collectives against 0.100 s for the others "
        "(4.0x), 3 looks in a row"
    )
    assert watch.look(7, {0: 0.1, 1: 0.1}) is None  # it caught up: the count starts over
    assert watch.look(7, slow) is None
    watch.look(7, {0: 0.4, 1: 0.1})  # another rank is the slow one: counted anew
    assert watch.look(7, {0: 0.4, 1: 0.1}) is None
    watch.forget(set())
    assert watch.look(7, slow) is None  # forgotten with its job


def test_one_slow_step_seen_again_is_not_a_straggler() -> None:
    """A rank stuck in one slow step (a checkpoint, no CPU for a moment) is seen slow at
    every look, but at the same step: it counts once."""
    watch = StragglerWatch(looks=3)
    slow = {0: 0.1, 1: 0.4}
    for _ in range(5):
        assert watch.look(3, slow, {0: 40.2, 1: 40.0}) is None
    assert watch.look(3, slow, {0: 41.2, 1: 41.0}) is None
    named = watch.look(3, slow, {0: 42.2, 1: 42.0})
    assert named is not None and named.looks == 3
    assert watch.look(3, slow, {0: 42.2, 1: 42.0}) == named  # still named, not counted on


@given(st.dictionaries(st.integers(0, 63), st.floats(0.05, 0.2), min_size=2, max_size=64))
def test_ranks_within_a_third_of_each_other_never_make_a_straggler(
    seconds: dict[int, float],
) -> None:
    low = min(seconds.values())
    alike = {r: min(s, low * 1.33) for r, s in seconds.items()}
    assert slowest(alike) is None
