"""What listings and the scheduler read of a job without its whole spec: the list
columns, and the `brief` (the spec's scheduling and display fields, as JSON)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from podium.spec.job import JobSpec

Row = sqlite3.Row
# Every column but the stored spec (script and environment included): what listings read.
LIST_COLUMNS = (
    "job_id, array_job_id, array_task_id, array_throttle, name, user, uid, gid, account, "
    "partition, qos, state, reason, held, nice, submit_time, start_time, end_time, node, "
    "gpus, gpu_ids, cpus, mem_mb, time_limit_s, exit_code, signal, restart_count, stdout, "
    "stderr, work_dir, exclude, checkpoint_mtime, stalled_restarts, cpu_ids, preempt_mode, "
    "brief"
)
# The spec's fields kept in the `brief` column.
BRIEF_FIELDS = (
    "gpu_type",
    "ntasks",
    "exclusive",
    "begin_time",
    "dependencies",
    "dependency_any",
    "kill_on_invalid_dep",
    "comment",
    "wckey",
)


def spec_of(row: Row) -> JobSpec:
    """The JobSpec stored with a job row."""
    return JobSpec.model_validate_json(row["spec"])


def brief_of(spec: JobSpec) -> str:
    """The `brief` column of a job: its spec's BRIEF_FIELDS as JSON."""
    return json.dumps(spec.model_dump(mode="json", include=set(BRIEF_FIELDS)))


def brief_from_json(spec_json: str) -> str:
    """The brief of a stored spec's JSON; `{}` when it cannot be read."""
    try:
        data = json.loads(spec_json)
    except (ValueError, TypeError):
        return "{}"
    if not isinstance(data, dict):
        return "{}"
    return json.dumps({k: data[k] for k in BRIEF_FIELDS if k in data})


def brief(row: Row | Mapping[str, Any]) -> dict[str, Any]:
    """A row's brief as a dict ({} when missing or unreadable)."""
    try:
        data = json.loads(row["brief"] or "{}")
    except (ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}
