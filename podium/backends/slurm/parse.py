"""Slurm's machine-readable output -> Podium's job and node records. Pure.

Reads `squeue --json` / `sinfo --json` (and slurmrestd's /jobs and /nodes, the same
documents) as Slurm 22.05 writes them (openapi v0.0.38: plain numbers and strings)
and as later versions do (v0.0.39+: numbers as {"set", "infinite", "number"}, states
as lists, exit codes as objects). Fields a version lacks read as None, never as an
error. The records carry the keys of the embedded cluster's (`server/job_rows.py`),
plus `nodes`/`node_count`/`slurm_state` for what only a multi-node cluster has.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from typing import Any

from podium.api.hostlist import hostlist
from podium.api.states import TERMINAL_STATES
from podium.api.times import iso, run_times
from podium.backends.slurm.slurm_values import (
    exit_status,
    gpu_indices,
    gres_count,
    memory_mb,
    number,
    states,
    text,
    wckey,
)
from podium.run.patterns import expand

# Slurm job states -> Podium's (server/job_rows.py uses Slurm's names already).
_STATE = {
    "CONFIGURING": "RUNNING",
    "COMPLETING": "RUNNING",
    "STAGE_OUT": "RUNNING",
    "SIGNALING": "RUNNING",
    "RESIZING": "RUNNING",
    "SUSPENDED": "RUNNING",
    "BOOT_FAIL": "NODE_FAIL",
    "DEADLINE": "TIMEOUT",
    "OUT_OF_MEMORY": "FAILED",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "REQUEUED": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "SPECIAL_EXIT": "FAILED",
    "REVOKED": "CANCELLED",
}
TERMINAL = TERMINAL_STATES
HELD_REASONS = {"JobHeldUser", "JobHeldAdmin", "job_requeued_in_held_state"}


def job_state(job: dict[str, Any]) -> str:
    """The Podium state of a Slurm job document."""
    words = states(job.get("job_state"))
    first = words[0] if words else "PENDING"
    return _STATE.get(first, first)


def job_record(job: dict[str, Any], now: float) -> dict[str, Any]:
    """One `squeue --json` job as Podium's job record."""
    state = job_state(job)
    terminal = state in TERMINAL
    submit = number(job.get("submit_time"))
    start = number(job.get("start_time")) if state != "PENDING" else None
    start = start or None
    end = number(job.get("end_time")) if terminal else None
    node_expr = text(job.get("nodes")) if state != "PENDING" else None
    nodes = hostlist(node_expr) if node_expr else []
    node_count = number(job.get("node_count")) or max(1, len(nodes))
    tasks = number(job.get("tasks")) or 1
    gpu_type, gpus = _gpus(job, node_count, tasks)
    details = job.get("gres_detail") or []
    by_node = {n: gpu_indices(d) for n, d in zip(nodes, details, strict=False)}
    code, signum = exit_status(job.get("exit_code")) if terminal else (None, None)
    reason = text(job.get("state_reason"))
    job_id = number(job.get("job_id")) or 0
    array_job, array_task, pending_tasks, shown = _array_ids(job, job_id)
    cpus = number(job.get("cpus")) or 1
    time_limit = number(job.get("time_limit"))
    record: dict[str, Any] = {
        "job_id": job_id,
        "display_id": shown,
        "array_job_id": array_job,
        "array_task_id": array_task,
        "array_task_string": pending_tasks if array_task is None else None,
        "name": job.get("name") or "",
        "user": job.get("user_name") or str(job.get("user_id", "")),
        "uid": number(job.get("user_id")),
        "account": text(job.get("account")) or "",
        "state": state,
        "ending": None,  # Slurm shows its CG jobs as RUNNING here
        "slurm_state": "+".join(states(job.get("job_state"))),
        "reason": reason,
        "partition": job.get("partition") or "",
        "qos": text(job.get("qos")) or "",
        "nice": number(job.get("nice")) or 0,
        "held": reason in HELD_REASONS,
        "gpus": gpus,
        "gpu_ids": by_node.get(nodes[0], []) if nodes else [],
        "gpu_ids_by_node": by_node,
        "gpu_type": gpu_type,
        "cpus": cpus,
        "mem_mb": memory_mb(str(job.get("tres_alloc_str") or job.get("tres_req_str") or "")),
        "ntasks": tasks,
        "node": node_expr,
        "nodes": nodes,
        "node_count": node_count,
        "excluded_nodes": hostlist(text(job.get("excluded_nodes")) or ""),
        "time_limit_s": time_limit * 60 if time_limit is not None else None,
        "exit_code": code,
        "signal": signum,
        **run_times(submit, start, end, now, gpus, cpus),
        "gpu_share": None,  # Slurm's records count GRES, not their share of a GPU
        "gpu_mem_peak_mb": None,
        "restart_count": number(job.get("restart_cnt")) or 0,
        "dependency": text(job.get("dependency")),
        "stdout": text(job.get("standard_output")),
        "stderr": text(job.get("standard_error")),
        "work_dir": job.get("current_working_directory") or "",
        "comment": text(job.get("comment")),
        "wckey": wckey(job.get("wckey")),
        "begin_epoch": number(job.get("eligible_time")) or None if state == "PENDING" else None,
        "mem_per": None,  # Slurm's JSON gives memory per node or per CPU with a flag bit
        "gpus_per_node": None,
    }
    for key in ("stdout", "stderr"):
        if record[key]:
            record[key] = output_path(str(record[key]), record)
    return record


def _gpus(job: dict[str, Any], node_count: int, tasks: int) -> tuple[str | None, int]:
    """The GPU type and count a job asked for, per node, per job or per task."""
    gpu_type, per_node = gres_count(str(job.get("tres_per_node") or ""))
    _, per_job = gres_count(str(job.get("tres_per_job") or ""))
    _, per_task = gres_count(str(job.get("tres_per_task") or ""))
    return gpu_type, per_job or per_node * node_count or per_task * tasks


def _array_ids(job: dict[str, Any], job_id: int) -> tuple[int | None, int | None, str | None, str]:
    """(array job id, task id, the tasks not yet started, the id as squeue shows it)."""
    array_job = number(job.get("array_job_id")) or None
    array_task = number(job.get("array_task_id")) if array_job else None
    pending_tasks = text(job.get("array_task_string")) if array_job else None
    if pending_tasks and array_task is None:
        shown = f"{array_job}_[{pending_tasks}]"  # the tasks not yet started, as squeue shows
    elif array_job:
        shown = f"{array_job}_{array_task}"
    else:
        shown = str(job_id)
    return array_job, array_task, pending_tasks, shown


def output_path(pattern: str, record: dict[str, Any]) -> str:
    """An output path with Slurm's %-patterns expanded for this job record (squeue
    --json leaves them in)."""
    return expand(
        pattern,
        job_id=record["job_id"],
        name=record["name"],
        user=record["user"],
        node=(record.get("nodes") or [""])[0],
        array_job_id=record.get("array_job_id"),
        array_task_id=record.get("array_task_id"),
    )


def node_label(state_words: list[str], reason: str | None) -> str:
    """The HyperPod-style health label of a Slurm node."""
    if "DOWN" in state_words:
        return "unschedulable-down"
    if "DRAIN" in state_words or "DRAINED" in state_words or "DRAINING" in state_words:
        if reason and reason.startswith("podium:"):
            if "deep check failed" in reason:
                return "deep-check-failed"
            if "reboot" in reason:
                return "unschedulable-pending-reboot"
            return "unschedulable-pending-reset"
        return "unschedulable-drained"
    return "schedulable"


def node_record(node: dict[str, Any], jobs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One `sinfo --json` node as Podium's node record; `jobs` are Podium job records
    (their gpu_ids_by_node say which job holds which GPU)."""
    name = str(node.get("name") or "")
    words = states(node.get("state")) + states(node.get("state_flags"))
    reason = text(node.get("reason"))
    drained = any(w in ("DRAIN", "DRAINED", "DRAINING") for w in words)
    busy = any(w in ("ALLOCATED", "MIXED", "COMPLETING") for w in words)
    if "DOWN" in words:
        state = "down"
    elif drained:
        state = "draining" if busy else "drained"
    elif "ALLOCATED" in words:
        state = "allocated"
    elif "MIXED" in words:
        state = "mixed"
    else:
        state = words[0].lower() if words else "unknown"
    gpu_type, total = gres_count(str(node.get("gres") or ""))
    _, used = gres_count(str(node.get("gres_used") or ""))
    owner = {
        i: j["job_id"]
        for j in jobs
        if j["state"] == "RUNNING"
        for i in (j.get("gpu_ids_by_node") or {}).get(name, [])
    }
    label = node_label(words, reason)
    health = {
        "label": label,
        "fenced": label != "schedulable",
        "fault": reason if reason and reason.startswith("podium:") else None,
        "reason": reason,
        "since": number(node.get("reason_changed_at")) or None,
        "last_deep_check": None,
        "recovery": "automatic",
    }
    features = node.get("active_features") or node.get("features") or []
    if isinstance(features, str):
        features = [f for f in features.split(",") if f]
    return {
        "node": name,
        "state": state,
        "slurm_state": "+".join(words),
        "responding": "NOT_RESPONDING" not in words,
        "reason": reason,
        "health": health,
        "agent": None,
        "cpus_total": number(node.get("cpus")) or 0,
        "cpus_alloc": number(node.get("alloc_cpus")) or 0,
        "mem_total_mb": number(node.get("real_memory")) or 0,
        "mem_alloc_mb": number(node.get("alloc_memory")) or 0,
        "gpus_total": total,
        "gpus_used": used,
        "gpu_type": gpu_type,
        "features": list(features),
        "partitions": list(node.get("partitions") or []),
        "gpus": [
            {
                "index": i,
                "type": gpu_type,
                "memory_mb": None,
                "uuid": None,
                "parent": None,  # sinfo does not say which GRES are MIG slices
                "mig_start": None,
                "share": None,
                "job_id": owner.get(i),
                "health": health,
            }
            for i in range(total)
        ],
    }


def jobcomp_record(line: str) -> dict[str, Any] | None:
    """One jobcomp/filetxt line ("JobId=1 UserId=root(0) ... ExitCode=0:0") as a job
    record, for `podium acct` on clusters without slurmdbd. None if it is not one."""
    fields = dict(re.findall(r"(\w+)=(\S*)", line))
    if "JobId" not in fields or not fields["JobId"].isdigit():
        return None

    def epoch(key: str) -> int | None:
        stamp = fields.get(key)
        if not stamp or stamp in ("Unknown", "None"):
            return None
        return int(dt.datetime.fromisoformat(stamp).timestamp())

    code_text, _, sig_text = fields.get("ExitCode", "0:0").partition(":")
    start, end = epoch("StartTime"), epoch("EndTime")
    user = fields.get("UserId", "")
    uid_match = re.search(r"\((\d+)\)", user)
    cpus = int(fields.get("ProcCnt", "1") or 1)
    elapsed = max(0, (end or 0) - (start or 0)) if start and end else 0
    gpu_type, gpus = gres_count(fields.get("Tres", "").replace("gres/", "gres:").replace("=", ":"))
    state = fields.get("JobState", "")
    state = _STATE.get(state, state)
    nodes_expr = text(fields.get("NodeList"))
    limit = fields.get("TimeLimit", "")
    return {
        "job_id": int(fields["JobId"]),
        "display_id": fields["JobId"],
        "array_job_id": None,  # jobcomp/filetxt does not record arrays, tasks, output
        "array_task_id": None,
        "array_task_string": None,
        "name": fields.get("Name", ""),
        "user": user.split("(")[0],
        "uid": int(uid_match.group(1)) if uid_match else None,
        "account": text(fields.get("Account")) or "",
        "state": state,
        "ending": None,  # Slurm shows its CG jobs as RUNNING here
        "partition": fields.get("Partition", ""),
        "qos": text(fields.get("QOS")) or "",
        "reason": "None",
        "nice": 0,
        "held": False,
        "gpus": gpus,
        "gpu_ids": [],
        "gpu_type": gpu_type,
        "cpus": cpus,
        "mem_mb": memory_mb(fields.get("Tres", "")),
        "ntasks": None,
        "node": nodes_expr,
        "nodes": hostlist(nodes_expr or ""),
        "node_count": int(fields.get("NodeCnt", "1") or 1),
        "time_limit_s": int(limit) * 60 if limit.isdigit() else None,
        "exit_code": int(code_text) if code_text.isdigit() else None,
        "signal": int(sig_text) if sig_text.isdigit() and int(sig_text) else None,
        "submit_time": iso(epoch("SubmitTime")),
        "start_time": iso(start),
        "end_time": iso(end),
        "submit_epoch": epoch("SubmitTime"),
        "start_epoch": start,
        "end_epoch": end,
        "elapsed_s": float(elapsed),
        "gpu_seconds": float(elapsed * gpus),
        "gpu_share": None,
        "gpu_mem_peak_mb": None,
        "cpu_seconds": float(elapsed * cpus),
        "restart_count": 0,
        "dependency": None,
        "stdout": None,
        "stderr": None,
        "work_dir": fields.get("WorkDir", ""),
        "comment": None,
        "wckey": text(fields.get("WCKey")),
        "begin_epoch": None,  # an ended job's: jobcomp does not keep it
        "mem_per": None,
        "gpus_per_node": None,
    }
