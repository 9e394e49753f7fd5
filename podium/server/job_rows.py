"""Job rows as the API shows them (stable snake_case keys, the documented JobRecord),
and what is read from a row."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from podium.api.times import iso, run_times
from podium.store.db import Row, brief


def display_id(row: Row | Mapping[str, Any]) -> str:
    """The id users see: "12"; for an array task "ARRAY_TASK" (e.g. "12_3"); for a
    pending array's tasks not yet started, "ARRAY_[INDICES]" (e.g. "12_[4-9%2]"), as
    squeue shows them."""
    if row["array_job_id"] is None:
        return str(row["job_id"])
    pending = array_task_string(row)
    if pending is not None:
        return f"{row['array_job_id']}_[{pending}]"
    return f"{row['array_job_id']}_{row['array_task_id']}"


def array_task_string(row: Row | Mapping[str, Any]) -> str | None:
    """A pending array's tasks not yet started, with its throttle ("4-9%2"), or None."""
    pending = row["array_pending"]
    if pending is None:
        return None
    throttle = row["array_throttle"]
    return f"{pending}%{throttle}" if throttle is not None else str(pending)


def step_records(job: Mapping[str, Any], rows: Iterable[Row]) -> list[dict[str, Any]]:
    """The StepRecords of one job (its record `job`) from its step rows."""
    out = []
    for r in rows:
        start, end = r["start_time"], r["end_time"]
        out.append(
            {
                "job_id": job["job_id"],
                "step_id": r["step_id"],
                "display_id": f"{job['display_id']}.{r['step_id']}",
                "name": r["name"],
                "state": r["state"],
                "exit_code": r["exit_code"],
                "signal": r["signal"],
                "start_time": iso(start),
                "end_time": iso(end),
                "elapsed_s": max(0.0, (end or time.time()) - start) if start else 0.0,
                "ntasks": r["ntasks"],
                "node": r["node"],
                "gpu_ids": json.loads(r["gpu_ids"] or "[]"),
            }
        )
    return out


def spares_step(job: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """The line `podium acct` gives a job's spares (--spares), as a step `ID.spares`:
    the GPUs held idle to replace a failed replica, from the job's start to its end,
    and the GPU-seconds they were charged (their share of the job's); None for a job
    without spares."""
    elastic = spec.get("elastic")
    if not isinstance(elastic, dict) or not int(elastic.get("spares") or 0):
        return None
    count = int(elastic["spares"])
    held = count * int(elastic.get("replica_gpus") or 0)
    gpus = list(job.get("gpu_ids") or [])
    share = held / len(gpus) if gpus else 0.0
    return {
        "job_id": job["job_id"],
        "step_id": "spares",
        "display_id": f"{job['display_id']}.spares",
        "name": "spares",
        "state": job["state"],
        "exit_code": None,
        "signal": None,
        "start_time": job["start_time"],
        "end_time": job["end_time"],
        "elapsed_s": job["elapsed_s"],
        "ntasks": count,
        "node": job.get("node") or "",
        "gpu_ids": gpus[len(gpus) - held :] if held <= len(gpus) else gpus,
        "gpu_seconds": round(float(job["gpu_seconds"]) * share, 3),
    }


GpuUnits = Callable[[list[int]], "float | None"]  # LocalNode.gpu_units


def job_records(
    rows: Sequence[Row], now: float, units: GpuUnits | None = None
) -> list[dict[str, Any]]:
    """The records of many rows: each row read once into a dict (a sqlite3.Row looks
    a column up by name in a linear scan; a listing reads 45 of them per job)."""
    if not rows:
        return []
    keys = rows[0].keys()
    return [job_record(dict(zip(keys, row, strict=True)), now, units) for row in rows]


def replicas_running(row: Row | Mapping[str, Any], elastic: Mapping[str, Any]) -> int:
    """How many replicas a running elastic job runs (its CPUs, in replicas', less its
    spares)."""
    held = int(row["cpus"]) // max(1, int(elastic.get("replica_cpus") or 1))
    return max(0, held - int(elastic.get("spares") or 0))


def job_record(
    row: Row | Mapping[str, Any], now: float, units: GpuUnits | None = None
) -> dict[str, Any]:
    """A job as the API and `--json` show it. `units` says what the GPUs it holds
    weigh when they are parts of GPUs (MIG slices, shards, MPS units): its gpu_share,
    and the gpu_seconds charged by it."""
    start, end = row["start_time"], row["end_time"]
    gpu_ids = json.loads(row["gpu_ids"]) if row["gpu_ids"] else []
    share = units(gpu_ids) if units is not None and gpu_ids else None
    spec = brief(row)  # {} when unreadable: such a job still lists
    ending = row["ending"]
    deps = spec.get("dependencies") or []
    sep = "?" if spec.get("dependency_any") else ","
    dependency = (
        sep.join(d["kind"] + "".join(f":{j}" for j in d.get("job_ids", [])) for d in deps) or None
    )
    gpus, ntasks = row["gpus"], spec.get("ntasks", 1)
    elastic = spec.get("elastic")
    if isinstance(elastic, dict) and row["state"] == "RUNNING":  # its size now
        ntasks = replicas_running(row, elastic)  # its spares hold GPUs too: counted
        gpus = (ntasks + int(elastic.get("spares") or 0)) * int(elastic.get("replica_gpus") or 0)
    return {
        "job_id": row["job_id"],
        "display_id": display_id(row),
        "array_job_id": row["array_job_id"],
        "array_task_id": row["array_task_id"],
        "array_task_string": array_task_string(row),
        "name": row["name"],
        "user": row["user"],
        "uid": row["uid"],
        "account": row["account"],
        "state": "COMPLETING" if ending and row["state"] == "RUNNING" else row["state"],
        "ending": ending,
        "reason": row["reason"],
        "partition": row["partition"],
        "qos": row["qos"],
        "nice": row["nice"],
        "held": bool(row["held"]),
        "gpus": gpus,
        "gpu_ids": gpu_ids,
        "gpu_type": spec.get("gpu_type"),
        "gpu_share": None if share is None else round(share, 4),
        "gpu_mem_peak_mb": row["gpu_mem_peak_mb"],
        "cpus": row["cpus"],
        "mem_mb": row["mem_mb"],
        "ntasks": ntasks,
        "node": row["node"],
        "nodes": [row["node"]] if row["node"] else [],
        "node_count": 1,
        "time_limit_s": row["time_limit_s"],
        "exit_code": row["exit_code"],
        "signal": row["signal"],
        **run_times(
            row["submit_time"], start, end, now, gpus if share is None else share, row["cpus"]
        ),
        "restart_count": row["restart_count"],
        "dependency": dependency,
        "stdout": row["stdout"],
        "stderr": row["stderr"],
        "work_dir": row["work_dir"],
        "comment": spec.get("comment"),
        "wckey": spec.get("wckey"),
        "begin_epoch": spec.get("begin_time"),
        "mem_per": _mem_per(spec.get("mem_request")),
        "gpus_per_node": spec.get("gpus_per_node"),
    }


def _mem_per(asked: Any) -> str | None:
    """What the job's memory was asked per: "node" (--mem), "cpu" (--mem-per-cpu) or
    "gpu" (--mem-per-gpu); None when it asked none (the partition's per-CPU default)."""
    if not isinstance(asked, list | tuple) or not asked:
        return None
    return {"mem": "node", "mem-per-cpu": "cpu", "mem-per-gpu": "gpu"}.get(str(asked[0]))


def held_units(row: Row) -> list[int]:
    """The device units a running job's row holds (its `gpu_ids` column): the node's
    GPUs, MIG slices, shards or MPS units by index, as the grant picked them."""
    return list(json.loads(row["gpu_ids"])) if row["gpu_ids"] else []


def gpu_owners(running: Iterable[Row]) -> dict[int, int]:
    """GPU index -> the job holding it, over these running jobs' rows."""
    return {g: r["job_id"] for r in running for g in held_units(r)}
