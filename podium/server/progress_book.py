"""What running jobs say of their progress (`podium progress`), kept in the daemon's
memory: a report costs no write, and a restarted daemon learns the rate again from the
next two reports. Each record is tied to its run by the run's start time, so a
requeued or resumed job is measured afresh (`podium.api.progress`)."""

from __future__ import annotations

from collections.abc import Iterable

from podium.api.progress import Progress


class ProgressBook:
    """The newest progress of each running job (callers hold the daemon's lock)."""

    def __init__(self) -> None:
        self._jobs: dict[int, Progress] = {}
        self.version = 0  # raised by every report (what the forecast depends on)

    def report(
        self, job_id: int, run_start: float, done: float, total: float, at: float
    ) -> Progress:
        """Note that job `job_id`, in its run started at `run_start`, has `done` of
        `total` at `at`; its record now."""
        before = self._jobs.get(job_id)
        now = (
            Progress.first(run_start, done, total, at)
            if before is None
            else before.then(run_start, done, total, at)
        )
        self._jobs[job_id] = now
        self.version += 1
        return now

    def of(self, job_id: int, run_start: float | None) -> Progress | None:
        """Job `job_id`'s progress in its run started at `run_start` (None: it reported
        none in this run)."""
        found = self._jobs.get(job_id)
        return found if found is not None and found.run_start == run_start else None

    def expected_end(self, job_id: int, run_start: float | None) -> float | None:
        """When its progress in this run says it ends (None: not known)."""
        found = self.of(job_id, run_start)
        return None if found is None else found.expected_end()

    def keep(self, running: Iterable[int]) -> None:
        """Forget the jobs that are no longer running."""
        alive = set(running)
        self._jobs = {j: p for j, p in self._jobs.items() if j in alive}


__all__ = ["ProgressBook"]
