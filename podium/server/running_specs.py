"""Running jobs' specs, parsed once from their rows and kept while they run: the
reactor, its passes and the recording of runs' ends all read them here."""

from __future__ import annotations

from podium.jobspec.job import JobSpec
from podium.store.db import Row, Store, spec_of


class RunningSpecs:
    """Each running job's JobSpec by job id, parsed on first use."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._specs: dict[int, JobSpec] = {}

    def of(self, row: Row) -> JobSpec:
        """The spec of the job of `row` (a row without its spec is read again whole)."""
        spec = self._specs.get(row["job_id"])
        if spec is None:
            if "spec" not in row.keys():  # noqa: SIM118 (sqlite3.Row: `in` tests values)
                row = self.store.job(row["job_id"])
            spec = spec_of(row)
            self._specs[row["job_id"]] = spec
        return spec

    def forget(self, job_id: int) -> None:
        """The job no longer runs here (ended, requeued, resized): drop its spec."""
        self._specs.pop(job_id, None)


__all__ = ["RunningSpecs"]
