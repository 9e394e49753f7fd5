"""`sacct --json`: job records under the names of Slurm 22.05's sacct --json (data
parser v0.0.38), for the fields Podium has. Clients read `jobs[].job_id`,
`jobs[].state.current`, `jobs[].exit_code`, `jobs[].time` and `jobs[].steps`; keys
Podium cannot fill are left out rather than invented.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]


def _epoch(value: Any) -> int:
    return int(value) if value else 0


def _iso_epoch(value: str | None) -> int:
    """A step record's ISO 8601 time as epoch seconds (0: none)."""
    from datetime import datetime

    return int(datetime.fromisoformat(value).timestamp()) if value else 0


def _exit_code(code: int | None, sig: int | None) -> dict[str, Any]:
    """Slurm's exit_code object: SUCCESS, ERROR (with return_code) or SIGNALED."""
    if sig:
        try:
            name = signal.Signals(sig).name.removeprefix("SIG")
        except ValueError:
            name = str(sig)
        return {
            "status": "SIGNALED",
            "return_code": code or 0,
            "signal": {"signal_id": sig, "name": name},
        }
    return {"status": "ERROR" if code else "SUCCESS", "return_code": code or 0}


def _tres(cpus: int, gpus: int, mem_mb: int | None) -> list[dict[str, Any]]:
    tres: list[dict[str, Any]] = [{"type": "cpu", "name": "", "id": 1, "count": cpus}]
    if mem_mb:
        tres.append({"type": "mem", "name": "", "id": 2, "count": mem_mb})
    tres.append({"type": "node", "name": "", "id": 4, "count": 1})
    if gpus:
        tres.append({"type": "gres", "name": "gpu", "id": 1001, "count": gpus})
    return tres


def _step(job: Row, step: Row) -> dict[str, Any]:
    node = step.get("node") or ""
    return {
        "step": {"job_id": job["job_id"], "id": step["display_id"], "name": step["name"]},
        "state": step["state"],
        "exit_code": _exit_code(step.get("exit_code"), step.get("signal")),
        "time": {
            "elapsed": int(step.get("elapsed_s") or 0),
            "start": _iso_epoch(step.get("start_time")),
            "end": _iso_epoch(step.get("end_time")),
        },
        "nodes": {"count": 1 if node else 0, "range": node, "list": [node] if node else []},
        "tasks": {"count": step.get("ntasks") or 1},
        "tres": {"allocated": _tres(job["cpus"], len(step.get("gpu_ids") or []), None)},
    }


def job_json(job: Row, state: str, steps: bool) -> dict[str, Any]:
    """One job (`state` as accounting has it) under sacct --json's names."""
    limit = job.get("time_limit_s")
    array_id = job.get("array_job_id")
    return {
        "account": job["account"],
        "array": {
            "job_id": array_id or 0,
            "task_id": job.get("array_task_id"),
            "task": job.get("array_task_string") or "",
        },
        "association": {
            "account": job["account"],
            "partition": job["partition"],
            "user": job["user"],
        },
        "comment": {"job": job.get("comment") or ""},
        "derived_exit_code": {"status": "SUCCESS", "return_code": 0},
        "exit_code": _exit_code(job.get("exit_code"), job.get("signal")),
        "job_id": job["job_id"],
        "name": job["name"],
        "nodes": job.get("node") or "None assigned",
        "partition": job["partition"],
        "qos": job.get("qos") or "",
        "required": {"CPUs": job["cpus"], "memory": job.get("mem_mb") or 0},
        "state": {"current": state, "reason": job.get("reason") or "None"},
        "steps": [_step(job, s) for s in job.get("steps", [])] if steps else [],
        "time": {
            "elapsed": int(job.get("elapsed_s") or 0),
            "submission": _epoch(job.get("submit_epoch")),
            "start": _epoch(job.get("start_epoch")),
            "end": _epoch(job.get("end_epoch")),
            "limit": limit // 60 if limit is not None else None,
        },
        "tres": {"allocated": _tres(job["cpus"], job["gpus"], job.get("mem_mb"))},
        "user": job["user"],
        "wckey": {"wckey": job.get("wckey") or "", "flags": []},
        "working_directory": job["work_dir"],
        "restart_cnt": job["restart_count"],
    }


def sacct_json(jobs: Sequence[Row], states: Sequence[str], steps: bool) -> str:
    """The whole document: `{"meta": ..., "errors": [], "jobs": [...]}`; `states[i]` is
    `jobs[i]`'s state as accounting has it."""
    document = {
        "meta": {
            "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {
                "version": {"major": 22, "micro": 0, "minor": 5},
                "release": "22.05 (Podium)",
            },
        },
        "errors": [],
        "jobs": [job_json(j, s, steps) for j, s in zip(jobs, states, strict=True)],
    }
    return json.dumps(document, indent=2)
