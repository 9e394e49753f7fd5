"""The pending queue is read once, then only the jobs the store says changed."""

from __future__ import annotations

from podium.api.selection import Selection
from tests.unit.server.harness import ME, Cluster


def test_the_queue_follows_the_stores_changes(c: Cluster) -> None:
    queue = c.reactor.queue
    a, b = c.submit("--gpus=1"), c.submit("--gpus=2", "--nice=5")
    assert queue.refresh() is True and set(queue.jobs) == {a, b}
    assert queue.refresh() is False  # nothing changed: nothing read
    c.control.cancel(ME, Selection((a,)))
    assert queue.refresh() is True and set(queue.jobs) == {b}
    assert queue.jobs[b].gpus == 2
    arr = c.submit("--array=0-3")
    queue.refresh()
    assert arr in queue.arrays and arr in queue.jobs


def test_a_requeued_job_carries_the_wait_of_its_earlier_stay(c: Cluster) -> None:
    """Issue 62: the wait guard counts a requeued job's earlier waits; the queue reads
    them from the store (from submission to its start: 30 s here)."""
    from podium.store.db import RunningStart

    job = c.submit("--gpus=1")
    c.store.mark_running([RunningStart(job, "n0", (0,), 1, 100, "o", "e")], 130.0)
    c.store.requeue(job, 200.0, "preempted")
    c.reactor.queue.refresh()
    assert c.reactor.queue.jobs[job].waited_s == 30.0
    assert c.reactor.queue.jobs[job].joined_at == 200.0
