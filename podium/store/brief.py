"""What listings and the scheduler read of a job without its whole spec: the list
columns, and the `brief` (the spec's scheduling and display fields, as JSON)."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from podium.jobspec.job import JobSpec

Row = sqlite3.Row
# Every column but the stored spec (script and environment included): what listings read.
LIST_COLUMNS = (
    "job_id, array_job_id, array_task_id, array_throttle, name, user, uid, gid, account, "
    "partition, qos, state, reason, held, nice, submit_time, start_time, end_time, node, "
    "gpus, gpu_ids, cpus, mem_mb, time_limit_s, exit_code, signal, restart_count, stdout, "
    "stderr, work_dir, exclude, checkpoint_mtime, stalled_restarts, cpu_ids, preempt_mode, "
    "brief, array_pending, gpu_mem_peak_mb, ending, elastic_state, lost_work, "
    "earlier_gpu_seconds, earlier_wait_seconds, queued_at"
)
# An array's tasks store no spec of their own (""): they share the array's row's (the
# row whose id is the array's: its pending tasks, or its first task for arrays stored
# by older versions). This reads the spec of any row.
SPEC_VALUE = (
    "COALESCE(NULLIF(spec, ''), (SELECT p.spec FROM jobs p WHERE p.job_id = jobs.array_job_id))"
)
SPEC_COLUMN = f"{SPEC_VALUE} AS spec"
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
    "elastic",
    "mem_request",
    "gpus_per_node",
    "gpus_per_task",
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


def brief(row: Row | Mapping[str, Any]) -> Mapping[str, Any]:
    """A row's brief, read-only ({} when missing or unreadable). Decoded once per
    distinct text: an array's tasks share theirs, and listings read thousands."""
    return _decoded(row["brief"] or "{}")


@functools.lru_cache(maxsize=1024)
def _decoded(text: str) -> Mapping[str, Any]:
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return MappingProxyType({})
    return MappingProxyType(data) if isinstance(data, dict) else MappingProxyType({})
