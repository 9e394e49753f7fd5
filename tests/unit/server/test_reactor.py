"""The reactor's transitions with recorded effects: a real store, no processes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from podium.server.reactor import PERIODIC_PASS_S
from tests.unit.server.harness import Cluster


def test_a_pass_starts_what_fits_and_says_why_the_rest_waits(c: Cluster) -> None:
    a, b, waiting = (c.submit("--gpus=1") for _ in range(3))
    assert c.reactor.tick() == 2
    assert [j for j, _ in c.effects.launched] == [a, b]
    assert {g for _, gpus in c.effects.launched for g in gpus} == {0, 1}
    assert c.state(waiting) == "PENDING"
    assert c.store.job(waiting)["reason"] == "Resources"
    assert (a, "BEGIN") in c.effects.notes


def test_passes_follow_changes_not_the_clock(c: Cluster) -> None:
    c.submit("--gpus=1")
    c.reactor.tick()
    assert c.reactor.pass_due() > PERIODIC_PASS_S / 2  # nothing changed: none due soon
    blocked = c.submit("--gpus=2")
    assert c.reactor.pass_due() == pytest.approx(0.0, abs=2.0)  # due now, not in 15-30 s (the
    # harness's clock is the wall's: a loaded machine took 0.2 s between the two calls)
    c.reactor.tick()
    assert c.store.job(blocked)["reason"] == "Resources"
    c.reactor.wake()  # a change the store does not see (a resume)
    assert c.reactor.pass_due() == pytest.approx(0.0, abs=0.05)


def test_an_end_is_recorded_charged_and_frees_the_gpus(c: Cluster) -> None:
    first = c.submit("--gpus=2")
    second = c.submit("--gpus=2")
    c.reactor.tick()
    c.end(first)
    c.reactor.tick()
    assert c.state(first) == "COMPLETED"
    assert c.state(second) == "RUNNING"
    assert sum(c.store.usage(160.0, 0).values()) == pytest.approx(60.0 * 2, rel=0.5)
    # Its runtime state is let go once, after the end is recorded; a running one's is kept.
    assert c.effects.forgotten == [(first, "COMPLETED")]


def test_a_run_lost_with_the_machine_fails_and_is_never_launched_again_unknowingly(
    c: Cluster,
) -> None:
    plain = c.submit("--gpus=1")
    resumable = c.submit("--gpus=1", "--auto-resume=2")
    c.reactor.tick()
    c.effects.lost |= {plain, resumable}
    c.reactor.collect()
    row = c.store.job(plain)
    assert row["state"] == "NODE_FAIL" and "machine restarted" in row["reason"]
    again = c.store.job(resumable)  # auto-resume: requeued, its restart counted
    assert again["state"] == "PENDING" and again["restart_count"] == 1
    assert sorted(c.effects.forgotten) == [(plain, "NODE_FAIL"), (resumable, "PENDING")]


def test_a_failed_run_with_auto_resume_is_requeued(c: Cluster) -> None:
    job = c.submit("--gpus=1", "--auto-resume=2")
    c.reactor.tick()
    c.end(job, "NODE_FAIL", 1)
    c.reactor.collect()
    row = c.store.job(job)
    assert row["state"] == "PENDING" and row["restart_count"] == 1
    del c.effects.ended[job]
    c.reactor.tick()
    assert c.state(job) == "RUNNING"


def test_a_job_cancelled_while_the_pass_thinks_is_not_started(
    c: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = c.submit("--gpus=1")
    other = c.submit("--gpus=1")
    import podium.server.reactor as reactor_module

    real = reactor_module.schedule

    def slow_schedule(*args: Any, **kw: Any) -> Any:
        decisions = real(*args, **kw)
        # Another thread (the API) cancels while the lock is let go.
        t = threading.Thread(target=lambda: c.store.cancel_pending([victim], 101.0))
        with c.reactor.lock:  # the API would wait here if the pass held the lock
            pass
        t.start()
        t.join()
        return decisions

    monkeypatch.setattr(reactor_module, "schedule", slow_schedule)
    assert c.reactor.run_pass() == 1
    assert c.state(victim) == "CANCELLED"
    assert c.state(other) == "RUNNING"
    assert [j for j, _ in c.effects.launched] == [other]


def test_a_drain_while_the_pass_thinks_voids_its_starts(
    c: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = c.submit("--gpus=1")
    import podium.server.reactor as reactor_module

    real = reactor_module.schedule

    def draining(*args: Any, **kw: Any) -> Any:
        decisions = real(*args, **kw)
        c.store.set_node_state(c.node.name, "drain", "maintenance", 0, 101.0)
        return decisions

    monkeypatch.setattr(reactor_module, "schedule", draining)
    assert c.reactor.run_pass() == 0
    assert c.state(job) == "PENDING"
    assert c.reactor.pass_due() >= 0.0 and c.reactor._wanted


def test_a_changed_queue_is_read_incrementally(c: Cluster) -> None:
    ids = [c.submit("--gpus=2", "--begin=now+1hours") for _ in range(5)]
    c.reactor.tick()
    assert set(c.reactor.queue.jobs) == set(ids)
    c.store.set_held(ids[:2], True, 101.0)
    assert c.reactor.queue.refresh()
    assert c.reactor.queue.jobs[ids[0]].held and not c.reactor.queue.jobs[ids[2]].held
    c.store.cancel_pending([ids[4]], 102.0)
    c.reactor.queue.refresh()
    assert ids[4] not in c.reactor.queue.jobs
    assert not c.reactor.queue.refresh()  # nothing new


def test_reasons_are_written_only_when_they_change(c: Cluster) -> None:
    c.submit("--gpus=2")
    waiting = [c.submit("--gpus=1") for _ in range(3)]
    c.reactor.tick()
    writes: list[dict[int, str]] = []
    real = c.store.set_reasons
    c.store.set_reasons = lambda reasons: (writes.append(dict(reasons)), real(reasons))[1]  # type: ignore[method-assign]
    c.reactor.wake()
    c.reactor.run_pass()
    assert writes == []  # the same reasons as before
    c.store.set_held([waiting[0]], True, 101.0)
    c.reactor.run_pass()
    # Only what changed: the held job, and the next one now first in line.
    assert writes == [{waiting[0]: "JobHeldUser", waiting[1]: "Resources"}]


def test_a_pass_that_starts_an_elastic_job_small_is_due_again_when_it_may_grow(
    c: Cluster,
) -> None:
    """CI saw a job grown 1 -> 2 never grow to 4: the pass that restarted it at 2 did
    not count it among the running jobs whose grow delay makes a pass due, so the next
    pass came only with the periodic one (30 s), after the job had finished."""
    import dataclasses

    c.reactor.policy = dataclasses.replace(c.reactor.policy, elastic_grow_delay_s=5.0)
    blocker = c.submit("--gpus=1")
    c.reactor.tick()
    elastic = c.submit("--elastic=1:2", "--gpus-per-task=1")
    assert c.reactor.tick() == 1 and c.state(elastic) == "RUNNING"
    assert c.state(blocker) == "RUNNING"
    assert c.reactor.pass_due() == pytest.approx(5.0, abs=0.5)  # not PERIODIC_PASS_S
