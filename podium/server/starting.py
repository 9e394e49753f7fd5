"""The stored facts of a job that the plan of its start reads, as one typed value.

A real start takes them from the job's row (`of_row`); `podium submit --dry-run` from
the submission it would store (`of_submission`), so the two go through the same
planning (`podium.server.launch.Planner.plan`) and cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from podium.api.caller import Caller
from podium.jobspec.job import JobSpec
from podium.store.db import Row
from podium.store.resize_table import elastic_state


@dataclass(frozen=True)
class StartingJob:
    """A job about to start: who it is and where it was queued."""

    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    partition: str
    qos: str
    account: str
    array_job_id: int | None = None
    array_task_id: int | None = None
    restart_count: int = 0
    resize_count: int = 0  # an elastic job's resizes so far

    @classmethod
    def of_row(cls, row: Row | Mapping[str, Any]) -> StartingJob:
        """The job as its stored row (`podium.store`) holds it."""
        return cls(
            job_id=row["job_id"],
            name=row["name"],
            user=row["user"],
            uid=row["uid"],
            gid=row["gid"],
            partition=row["partition"],
            qos=row["qos"],
            account=row["account"],
            array_job_id=row["array_job_id"],
            array_task_id=row["array_task_id"],
            restart_count=row["restart_count"],
            resize_count=len(elastic_state(row).get("resizes") or ()),
        )

    @classmethod
    def of_submission(cls, spec: JobSpec, who: Caller, job_id: int = 0) -> StartingJob:
        """The job a submission of `spec` by `who` would store (before its id is known:
        `job_id` 0), as a dry run shows it."""
        return cls(
            job_id=job_id,
            name=spec.name,
            user=who.name,
            uid=who.uid,
            gid=who.gid,
            partition=spec.partition,
            qos=spec.qos,
            account=spec.account,
        )
