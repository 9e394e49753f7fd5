"""A host with a slow link, named from its ranks' link checks: both links through it
slow, against the fastest link, three looks in a row at later steps."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from podium.recover.slow_links import LinkWatch, slow_rank


def test_both_links_through_a_host_name_its_rank() -> None:
    # rank 2's host is slow: what 2 receives (from 1) and what 3 receives (from 2)
    assert slow_rank({0: 0.01, 1: 0.012, 2: 0.35, 3: 0.34}) == (2, 0.35, 0.34, 0.01)
    assert slow_rank({0: 0.40, 1: 0.011, 2: 0.01, 3: 0.38}) == (3, 0.38, 0.40, 0.01)  # wraps
    assert slow_rank({0: 0.01, 1: 0.35, 2: 0.34}) == (1, 0.35, 0.34, 0.01)  # three ranks


def test_what_no_one_host_explains_names_nobody() -> None:
    assert slow_rank({0: 0.01, 1: 0.01, 2: 0.35, 3: 0.01}) is None  # one link: either end
    assert slow_rank({0: 0.3, 1: 0.3}) is None  # two ranks share both links
    assert slow_rank({0: 0.01, 1: 0.04, 2: 0.045, 3: 0.01}) is None  # under the floor
    assert slow_rank({0: 0.3, 1: 0.3, 2: 0.3, 3: 0.3}) is None  # all slow alike
    assert slow_rank({0: 0.01, 1: 0.3, 2: 0.3, 3: 0.3, 4: 0.3}) is None  # two hosts
    assert slow_rank({0: 0.01, 2: 0.3, 3: 0.3}) is None  # a rank did not say


def test_a_rank_is_named_after_three_looks_at_later_steps() -> None:
    watch, slow = LinkWatch(), {0: 0.01, 1: 0.012, 2: 0.35, 3: 0.34}
    assert watch.look(10, slow) is None
    assert watch.look(10, slow) is None  # the same check again counts once
    assert watch.look(20, slow) is None
    named = watch.look(30, slow)
    assert named is not None and named.rank == 2 and named.looks == 3
    assert "rank 2's links took 0.350 s in and 0.340 s out" in named.words()
    assert watch.look(40, {0: 0.01, 1: 0.01, 2: 0.01, 3: 0.01}) is None
    assert watch.look(50, slow) is None  # a healthy look in between starts again


@given(st.lists(st.floats(0.001, 0.03), min_size=3, max_size=16))
def test_links_within_the_floor_never_name_anyone(seconds: list[float]) -> None:
    """Healthy noise: however the links vary under FLOOR_S (50 ms), no rank is named."""
    watch = LinkWatch()
    links = dict(enumerate(seconds))
    assert all(watch.look(step, links) is None for step in range(1, 10))
