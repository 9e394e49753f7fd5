"""Finding the slow node(s) by bisection: the policy, with runs judged by which nodes
are slow (a run is as slow as its slowest node, as a ring all-reduce is)."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from podium.node.health.slow_nodes import Group, Measured, find_slow_nodes


def cluster(
    slow: set[str], fails: frozenset[str] = frozenset()
) -> tuple[Callable[[list[Group]], list[Measured]], list[list[Group]]]:
    """A measure callable for nodes whose figures are 100 GB/s, 5 for slow ones; a run
    with a failing node fails. It records the rounds it was asked to run."""
    rounds: list[list[Group]] = []

    def measure(groups: list[Group]) -> list[Measured]:
        used = [n for g in groups for n in g]
        assert len(used) == len(set(used)), f"one round's runs share nodes: {groups}"
        rounds.append(groups)
        out = []
        for g in groups:
            if set(g) & fails:
                out.append(Measured(None, "failed"))
            else:
                out.append(Measured(5.0 if set(g) & slow else 100.0))
        return out

    return measure, rounds


def is_slow(m: Measured) -> bool:
    return m.busbw is None or m.busbw < 70.0


NODES = [f"n{i}" for i in range(1, 5)]


def test_a_healthy_set_takes_one_run() -> None:
    measure, _ = cluster(set())
    found = find_slow_nodes(NODES, measure, is_slow)
    assert found.healthy and not found.bad and len(found.runs) == 1


def test_one_slow_node_of_four_in_six_runs_and_four_rounds() -> None:
    measure, _ = cluster({"n3"})
    found = find_slow_nodes(NODES, measure, is_slow)
    assert set(found.bad) == {"n3"} and not found.unresolved
    assert len(found.runs) == 6 and found.rounds == 4
    convicting, first = found.bad["n3"], found.accused["n3"]
    assert convicting.nodes[0] == first.nodes[0] == "n3"
    assert {convicting.nodes[1], first.nodes[1]} == {"n1", "n2"}  # two different partners
    assert convicting.measured.busbw == 5.0 and convicting.round == first.round + 1


def test_one_slow_run_beside_a_good_node_is_not_a_conviction() -> None:
    """Noise: n4 is slow the first time it runs beside a good node, at speed the second."""
    measure, _ = cluster({"n3"})
    noisy: list[Group] = []

    def once_slow(groups: list[Group]) -> list[Measured]:
        out = measure(groups)
        for i, g in enumerate(groups):
            if g[0] == "n4" and len(g) == 2 and not noisy:
                noisy.append(g)
                out[i] = Measured(5.0)
        return out

    found = find_slow_nodes(NODES, once_slow, is_slow)
    assert noisy and set(found.bad) == {"n3"} and "n4" in found.accused
    assert not found.unresolved


def test_a_failing_node_is_found_like_a_slow_one() -> None:
    measure, _ = cluster(set(), fails=frozenset({"n2"}))
    found = find_slow_nodes(NODES, measure, is_slow)
    assert set(found.bad) == {"n2"}


def test_two_slow_nodes_in_different_halves_are_both_found() -> None:
    measure, _ = cluster({"n1", "n3"})
    found = find_slow_nodes(NODES, measure, is_slow)
    assert set(found.bad) == {"n1", "n3"} and not found.unresolved


def test_two_nodes_alone_cannot_tell_which_is_slow_without_a_spare() -> None:
    measure, _ = cluster({"n2"})
    found = find_slow_nodes(["n1", "n2"], measure, is_slow)
    assert not found.bad and sorted(found.unresolved) == ["n1", "n2"]
    measure, rounds = cluster({"n2"})
    found = find_slow_nodes(["n1", "n2"], measure, is_slow, spare=["n9"])
    assert set(found.bad) == {"n2"} and not found.unresolved
    assert all("n9" not in found.bad for _ in rounds)


def test_every_node_slow_names_none_as_good() -> None:
    measure, _ = cluster(set(NODES))
    found = find_slow_nodes(NODES, measure, is_slow)
    assert not found.healthy
    assert set(found.bad) | set(found.unresolved) == set(NODES)


@given(st.integers(min_value=3, max_value=64), st.data())
def test_one_slow_node_is_found_in_2k_plus_2_runs(n: int, data: st.DataObject) -> None:
    nodes = [f"n{i}" for i in range(n)]
    bad = data.draw(st.sampled_from(nodes))
    measure, _ = cluster({bad})
    found = find_slow_nodes(nodes, measure, is_slow)
    assert set(found.bad) == {bad} and not found.unresolved
    k = math.ceil(math.log2(n))
    assert len(found.runs) <= 2 * k + 2, [r.nodes for r in found.runs]


@given(st.integers(min_value=2, max_value=24), st.data())
def test_a_good_node_is_never_named(n: int, data: st.DataObject) -> None:
    nodes = [f"n{i}" for i in range(n)]
    slow = set(data.draw(st.lists(st.sampled_from(nodes), max_size=n, unique=True)))
    measure, _ = cluster(slow)
    found = find_slow_nodes(nodes, measure, is_slow)
    assert set(found.bad) <= slow
    assert found.healthy == (not slow)
    if slow and len(slow) < n:  # a good node exists: every slow node is found
        assert set(found.bad) | set(found.unresolved) >= slow
