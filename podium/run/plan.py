"""LaunchPlan and JobResult: the files between the daemon and a supervisor.

Standard library only. Both are written atomically (temp file, fsync, rename), so a
reader sees either nothing or the whole file.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PLAN_FILE = "launch.json"
STARTED_FILE = "started.json"
RESULT_FILE = "result.json"
LOCK_FILE = "lock"
SCRIPT_FILE = "script"
SUPERVISOR_LOG = "supervisor.log"


@dataclass
class TaskPlan:
    """One task of a job: its rank on the node and the GPUs it sees."""

    procid: int
    localid: int
    gpu_ids: list[int]


@dataclass
class LaunchPlan:
    """Everything a supervisor needs to run a job, resolved by the daemon."""

    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    groups: list[int]
    argv: list[str]
    work_dir: str
    submit_dir: str
    environment: dict[str, str]
    tasks: list[TaskPlan]
    stdout: str
    stderr: str | None
    stdin: str | None
    open_mode: str
    node: str
    gpu_ids: list[int]
    cpus: int
    cpus_per_task: int
    time_limit_s: int | None
    kill_wait_s: float
    signal_num: int | None = None
    signal_before_s: int = 60
    signal_batch_only: bool = False
    array_job_id: int | None = None
    array_task_id: int | None = None
    restart_count: int = 0
    checkpoint_dir: str | None = None
    partition: str = ""
    qos: str = ""
    account: str = ""
    proctrack: str = "auto"
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchPlan:
        data = dict(data)
        data["tasks"] = [TaskPlan(**t) for t in data["tasks"]]
        return cls(**data)


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

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        data = dict(data)
        data["tasks"] = [TaskResult(**t) for t in data.get("tasks", [])]
        return cls(**data)


def write_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` so readers see all of it or nothing."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(asdict(data) if hasattr(data, "__dataclass_fields__") else data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object at `path`, or None when it does not exist."""
    try:
        with open(path) as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None
    return data if isinstance(data, dict) else None
