"""The charging and preemption rules the daemon and the simulator share."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.api.states import PreemptMode
from podium.sched import Allocation
from podium.sched.accounting import (
    UsageLedger,
    allocation_usage,
    live_usage,
    requeued_after_preemption,
    run_usage,
    share_tree,
)
from podium.store.db import Store

HALF_LIFE = 3600.0


def _alloc(account: str, user: str, gpus: int, cpus: int, start: float) -> Allocation:
    return Allocation(
        job_id=1,
        user=user,
        account=account,
        node="n0",
        gpu_indices=tuple(range(gpus)),
        cpus=cpus,
        mem_mb=1,
        start_time=start,
        time_limit_s=60.0,
    )


def test_a_run_is_charged_gpu_seconds_plus_weighted_cpu_seconds() -> None:
    assert run_usage(10.0, 2, 8, 0.0) == 20.0
    assert run_usage(10.0, 2, 8, 0.5) == 60.0
    assert run_usage(-5.0, 2, 8, 0.5) == 0.0  # a clock step back charges nothing


def test_live_usage_adds_what_running_allocations_used_and_leaves_the_stored_alone() -> None:
    stored = {("a", "u"): 100.0}
    running = [_alloc("a", "u", 2, 4, 50.0), _alloc("b", "v", 1, 1, 90.0)]
    live = live_usage(stored, running, 100.0, 0.25)
    assert live == {("a", "u"): 100.0 + 50 * (2 + 1.0), ("b", "v"): 10 * 1.25}
    assert stored == {("a", "u"): 100.0}
    assert live[("b", "v")] == allocation_usage(running[1], 100.0, 0.25)


charges = st.lists(
    st.tuples(
        st.sampled_from([("a", "u"), ("a", "v"), ("b", "u")]),
        st.floats(0.0, 1e6, allow_nan=False),
        st.floats(0.0, 1e5, allow_nan=False),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(charges)
def test_the_ledger_keeps_usage_exactly_as_the_store_does(
    steps: list[tuple[tuple[str, str], float, float]],
) -> None:
    ledger = UsageLedger(HALF_LIFE)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "db")
        now = 0.0
        for key, amount, gap in steps:
            now += gap
            ledger.charge(key, amount, now)
            store.charge(key[0], key[1], amount, now, HALF_LIFE)
        later = now + 1234.5
        assert ledger.at(later) == store.usage(later, HALF_LIFE)
        store.close()


def test_the_share_tree_has_configured_shares_and_one_share_for_the_unconfigured() -> None:
    tree = share_tree({"lab": 3}, {"lab": {"ann": 2}}, [("lab", "bob"), ("ext", "cy")])
    lab, ext = tree.children
    assert (lab.name, lab.shares, ext.name, ext.shares) == ("lab", 3, "ext", 1)
    assert [(u.name, u.shares, u.is_user) for u in lab.children] == [
        ("ann", 2, True),
        ("bob", 1, True),
    ]
    assert [(u.name, u.shares) for u in ext.children] == [("cy", 1)]


@pytest.mark.parametrize(
    ("mode", "may_requeue", "requeued"),
    [
        (PreemptMode.REQUEUE, True, True),
        ("requeue", True, True),
        (None, True, True),
        (PreemptMode.CANCEL, True, False),
        ("cancel", True, False),
        (PreemptMode.REQUEUE, False, False),
        (None, False, False),
    ],
)
def test_a_preempted_run_is_requeued_only_in_requeue_mode_and_when_allowed(
    mode: PreemptMode | str | None, may_requeue: bool, requeued: bool
) -> None:
    assert requeued_after_preemption(mode, may_requeue) is requeued
