"""JobResult: what a job's supervisor recorded when the job was over, as the daemon
reads it (the supervisor writes it with `podium.run.results.result_record`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TaskResult:
    procid: int
    exit_code: int | None
    signal: int | None


@dataclass
class JobResult:
    """What a supervisor records when its job is over."""

    state: str
    exit_code: int | None
    signal: int | None
    start_time: float
    end_time: float
    reason: str = "None"
    tasks: list[TaskResult] = field(default_factory=list)
    leftover_killed: int = 0
    fault: str | None = None  # "hang" or "node": Podium stopped the job for a fault
    steps: list[dict[str, Any]] = field(default_factory=list)  # podium.run.steps records

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        data = dict(data)
        data["tasks"] = [TaskResult(**t) for t in data.get("tasks", [])]
        return cls(**data)
