"""The REST API's request bodies and query values, checked by pydantic at the door:
each route turns its body into the value the parts below take (a `Selection`, a
`JobFilter`), so that one value goes from the route to the store."""

from __future__ import annotations

import re
from typing import Annotated, Literal, NamedTuple

from fastapi import Depends, Path, Query
from pydantic import Field

from podium.api.selection import JobFilter, Selection
from podium.api.text import printable
from podium.config.validation import RequestModel
from podium.errors import SpecError
from podium.jobspec.job import JobState
from podium.jobspec.values import MAX_JOB_ID

MAX_TIME_LIMIT_S = 100 * 365 * 86400
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z: the latest time a query may name
Epoch = Annotated[float | None, Query(ge=0, le=MAX_EPOCH, allow_inf_nan=False)]
JobId = Annotated[int, Field(ge=1, le=MAX_JOB_ID)]
_JOB_REF = re.compile(r"([1-9][0-9]{0,9})(?:_(0|[1-9][0-9]{0,9}))?")


class JobRef(NamedTuple):
    """A job named in a URL path: a job id, or an array task by its display id
    (ARRAY_INDEX, as squeue prints it and the CLI takes it)."""

    job_id: int
    task: int | None


def job_ref(
    job_id: Annotated[str, Path(max_length=32, description="a job id (12) or array task (12_3)")],
) -> JobRef:
    """The job a path names, read strictly: digits with no sign, leading zero, point or
    separator, or ARRAY_INDEX. Python's int() would take `1_0` as 10 and `+1`, `01`
    as 1, so a route could act on another job than the one written. Raises SpecError."""
    found = _JOB_REF.fullmatch(job_id)
    if found is None or int(found[1]) > MAX_JOB_ID or int(found[2] or 0) > MAX_JOB_ID:
        raise SpecError(
            f"invalid request: job_id: {printable(job_id)!r} is not a job: give a job id "
            f"(digits, no sign or leading zero, at most {MAX_JOB_ID}: 12) or an array task "
            "as ARRAY_INDEX (12_3)"
        )
    return JobRef(int(found[1]), None if found[2] is None else int(found[2]))


JobIdPath = Annotated[JobRef, Depends(job_ref)]


TaskIndex = Annotated[int, Field(ge=0, le=MAX_JOB_ID)]


class SelectionBody(RequestModel):
    """The wire form of a `Selection`: jobs to act on by ids, array tasks as [array
    id, index], and/or filters (as scancel)."""

    job_ids: list[JobId] = Field(default_factory=list, max_length=100_000)
    tasks: list[tuple[JobId, TaskIndex]] = Field(default_factory=list, max_length=100_000)
    user: str | None = None
    name: str | None = None
    states: list[str] | None = None

    def selection(self) -> Selection:
        """The Selection this body names, its states checked (SpecError)."""
        states = states_named(",".join(self.states)) if self.states else None
        return Selection(
            tuple(self.job_ids),
            self.user,
            self.name,
            tuple(states) if states is not None else None,
            tuple(self.tasks),
        )


class SignalRequest(RequestModel):
    """A signal for running jobs (scancel --signal): to their srun steps, their batch
    shell (-b) or every process (-f)."""

    job_ids: list[JobId] = Field(default_factory=list, max_length=100_000)
    tasks: list[tuple[JobId, TaskIndex]] = Field(default_factory=list, max_length=100_000)
    signal: int = Field(ge=1, le=64)
    scope: Literal["steps", "batch", "full"] = "steps"

    def selection(self) -> Selection:
        """The jobs to signal."""
        return Selection(tuple(self.job_ids), tasks=tuple(self.tasks))


class TimeLimit(RequestModel):
    """A job's new time limit in seconds (scontrol update TimeLimit=); null: none."""

    time_limit_s: int | None = Field(ge=1, le=MAX_TIME_LIMIT_S)


class DrainRequest(RequestModel):
    reason: str


class CheckpointRequest(RequestModel):
    step: int = Field(ge=0, le=2**62)


class NiceRequest(RequestModel):
    nice: int = Field(ge=-10000, le=10000)


class ProgressRequest(RequestModel):
    done: float = Field(ge=0, le=1e15, allow_inf_nan=False)
    total: float = Field(gt=0, le=1e15, allow_inf_nan=False)


class ResumeRequest(RequestModel):
    gpu: int | None = Field(default=None, ge=0, le=1023)


class MigApplyRequest(RequestModel):
    gpu: int = Field(ge=0, le=1023)
    layout: str = Field(max_length=512)  # profiles joined by commas, or "whole"


class HealthRequest(RequestModel):
    deep: bool = False


class InjectRequest(RequestModel):
    """A fault: a hung rank (SIGSTOP) or a killed one (SIGKILL) of a running job, or an
    Xid for one GPU written where the health agent reads the kernel's messages."""

    kind: Literal["hang", "kill", "xid"]
    job_id: JobId | None = None
    rank: int = Field(default=0, ge=0, le=MAX_JOB_ID)
    gpu: int | None = Field(default=None, ge=0, le=1023)
    code: int = Field(default=79, ge=1, le=999)


def states_named(text: str | None) -> list[str] | None:
    """The states a --state/-t list names (upper-cased; ALL, as squeue takes it: every
    state); None when none is given. Raises SpecError on an unknown one."""
    if text is None or text == "":
        return None
    states = [s.strip().upper() for s in text.split(",") if s.strip()]
    valid = {s.value for s in JobState}
    if "ALL" in states:
        return sorted(valid)
    bad = [s for s in states if s not in valid]
    if bad:
        raise SpecError(
            f"unknown state {bad[0]!r}: expected ALL or one of {', '.join(sorted(valid))}"
        )
    return states


def job_filter(
    state: str | None,
    user: str | None,
    name: str | None = None,
    *,
    finished: bool = False,
    since: float | None = None,
    until: float | None = None,
) -> JobFilter:
    """The JobFilter a listing's query names (its --state list checked: SpecError)."""
    states = states_named(state)
    return JobFilter(
        tuple(states) if states is not None else None, user, name, finished, since, until
    )
