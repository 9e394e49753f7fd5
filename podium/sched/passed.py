"""When each waiting job was first passed over: a job submitted after it started while
it waited (since it last joined the queue). Least attained service's wait guard counts
from then (`LasRules.overdue_at`): a job that nobody has passed waits no longer than
in submit order, whatever the tiers and QoS ahead of it; one that later jobs pass is
overdue after a bound read from its own time limit.

Pure bookkeeping for whoever applies a pass's starts (the daemon's reactor, the
simulator, the forecast): `queued` as a job joins the queue, `started` as one starts,
`gone` as one leaves otherwise. Amortised O(log n) per job: each waiting job is passed
at most once per stay in the queue.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import replace

from podium.sched.model import PendingJob
from podium.sched.order import PendingGroups


class PassedClock:
    """Waiting jobs not yet passed, in submit order, and when the others were."""

    def __init__(self) -> None:
        self._waiting: list[tuple[float, int]] = []  # (submit time, job id), not passed
        self._submit: dict[int, float] = {}  # every waiting job's submit time
        self.passed: dict[int, float] = {}  # job id -> when first passed

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._submit

    def at(self, job_id: int) -> float | None:
        """When `job_id` was first passed in its current wait (None: not yet)."""
        return self.passed.get(job_id)

    def queued(self, job_id: int, submit_time: float, passed_at: float | None = None) -> None:
        """`job_id` (submitted at `submit_time`) joins the queue, or joins it again:
        nobody has passed it yet (or, as a caller that kept it knows, at `passed_at`)."""
        self.gone(job_id)
        self._submit[job_id] = submit_time
        if passed_at is not None:
            self.passed[job_id] = passed_at
        else:
            insort(self._waiting, (submit_time, job_id))

    def started(self, job_id: int, submit_time: float, now: float) -> list[int]:
        """`job_id`, submitted at `submit_time`, starts at `now`: every waiting job
        submitted before it is passed (from now, if not before). The ids newly passed."""
        self.gone(job_id)
        cut = bisect_left(self._waiting, (submit_time, job_id))
        newly = [j for _, j in self._waiting[:cut]]
        del self._waiting[:cut]
        for j in newly:
            self.passed[j] = now
        return newly

    def mark(self, pending: Mapping[int, PendingJob]) -> dict[int, PendingJob]:
        """`pending` (the whole queue, by id) with each job's `passed_at` as kept here:
        a job new to the clock joins it (with the `passed_at` it carries), one that is
        no longer pending leaves it. Jobs whose `passed_at` is already right are the
        same objects."""
        for job_id in [j for j in self._submit if j not in pending]:
            self.gone(job_id)
        marked = dict(pending)
        for job_id, job in pending.items():
            if job_id not in self._submit:
                self.queued(job_id, job.submit_time, job.passed_at)
            at = self.passed.get(job_id)
            if at != job.passed_at:
                marked[job_id] = replace(job, passed_at=at)
        return marked

    def view(self, pending: Mapping[int, PendingJob]) -> dict[int, PendingJob]:
        """`pending` with the `passed_at` kept here, changing nothing (for a reader
        beside the one that applies passes)."""
        passed = dict(self.passed)  # one C-level copy: a pass writing meanwhile cannot tear it
        return {
            j: replace(job, passed_at=passed[j])
            if passed.get(j, job.passed_at) != job.passed_at
            else job
            for j, job in pending.items()
        }

    def gone(self, job_id: int) -> None:
        """`job_id` left the queue (started, cancelled, ended)."""
        submit = self._submit.pop(job_id, None)
        if submit is None:
            return
        if self.passed.pop(job_id, None) is None:
            at = bisect_left(self._waiting, (submit, job_id))
            if at < len(self._waiting) and self._waiting[at] == (submit, job_id):
                del self._waiting[at]


def pass_over(
    pending: dict[int, PendingJob], groups: PendingGroups, job_ids: Iterable[int], now: float
) -> None:
    """The waiting `job_ids` were passed at `now` (`PassedClock.started`): each one
    still in `pending` carries it from now on, in `groups` too."""
    for job_id in job_ids:
        old = pending.get(job_id)
        if old is None:
            continue
        groups.remove(old)
        pending[job_id] = new = replace(old, passed_at=now)
        groups.add(new)


__all__ = ["PassedClock", "pass_over"]
