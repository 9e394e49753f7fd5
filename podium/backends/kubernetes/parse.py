"""Kubernetes objects -> Podium's job records (pure: dicts in, dicts out; the clock is
passed in).

A job is a batch/v1 Job or a JobSet labelled `podium.dev/job-id`; what Podium knew at
submission (user, account, QoS, resources, time limit) is in its `podium.dev/record`
annotation. Its state comes from the object's conditions, Kueue's Workload for it and
its pods, in Slurm's words:

| Kubernetes / Kueue                                   | state     | reason          |
|------------------------------------------------------|-----------|-----------------|
| annotation `podium.dev/cancelled`                    | CANCELLED |                 |
| Job `Complete` / JobSet `Completed`                  | COMPLETED |                 |
| `Failed`, a pod past `activeDeadlineSeconds`         | TIMEOUT   |                 |
| `Failed`, otherwise                                  | FAILED    | (exit code)     |
| no Workload yet                                      | PENDING   | None            |
| Workload `spec.active: false`                        | PENDING   | JobHeldUser     |
| Workload `Admitted`                                  | RUNNING   |                 |
| Workload `Evicted` by `Preempted`, not readmitted    | PENDING   | Preempted       |
| Workload `Evicted` otherwise (not by deactivation)   | PENDING   | Kueue's reason  |
| `QuotaReserved` false: no quota free                 | PENDING   | Resources       |
| `QuotaReserved` false: LocalQueue or ClusterQueue    | PENDING   | PartitionConfig |
|   missing or stopped (inadmissible)                  |           |                 |

Kueue's own condition and message are kept under the record's `kueue` key.

A node's record comes from its Node object: cordoned (`spec.unschedulable`) is Slurm's
drain, not Ready is down, and HyperPod's `sagemaker.amazonaws.com/node-health-status`
label gives its health label.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from podium.api.records import JobRecord
from podium.api.times import run_times
from podium.backends.kubernetes.elastic_jobset import elastic_fields
from podium.backends.kubernetes.translate import HEALTH_LABEL
from podium.backends.kubernetes.translate import JOB_ID_LABEL as JOB_ID_LABEL  # re-exported
from podium.backends.kubernetes.translate import RECORD_ANNOTATION as RECORD_ANNOTATION

CANCELLED_ANNOTATION = "podium.dev/cancelled"
RESTARTS_ANNOTATION = "podium.dev/restart-count"
STARTED_ANNOTATION = "podium.dev/started"  # a cancelled job's start, kept at its cancel
DRAIN_ANNOTATION = "podium.dev/drain-reason"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")
GPU = "nvidia.com/gpu"
# HyperPod's node-health-status values -> Podium's health labels (podium.api.health)
HEALTH_LABELS = {
    "Schedulable": "schedulable",
    "Unschedulable": "unschedulable-drained",
    "UnschedulablePendingReboot": "unschedulable-pending-reboot",
    "UnschedulablePendingReplacement": "unschedulable-pending-replacement",
}
_INADMISSIBLE = ("doesn't exist", "does not exist", "is inactive", "is stopped", "Inadmissible")

Obj = dict[str, Any]


def epoch(stamp: str | None) -> float | None:
    """An RFC 3339 time from the API server as epoch seconds (None stays None)."""
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def condition_of(obj: Obj | None, kind: str) -> Obj | None:
    """The object's condition of type `kind` (one per type), whatever its status."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """The condition of type `kind` when its status is True."""
    found = condition_of(obj, kind)
    return found if found is not None and found.get("status") == "True" else None


def job_id_of(obj: Obj) -> int | None:
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_ID_LABEL, "")
    return int(value) if str(value).isdigit() else None


def job_record(obj: Obj, workload: Obj | None, pods: list[Obj], now: float) -> dict[str, Any]:
    """The record of one Podium job (a Job or JobSet `obj`), with Kueue's Workload for
    it (None: not made yet) and its pods."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    known: dict[str, Any] = json.loads(annotations.get(RECORD_ANNOTATION) or "{}")
    job_id = job_id_of(obj) or 0
    state, reason, held, kueue = _state(obj, workload, pods)
    start = _start(obj, workload, pods) if state != "PENDING" else None
    if state == "CANCELLED" and STARTED_ANNOTATION not in annotations:
        start = None  # cancelled while it waited
    end = _end(obj, annotations) if state in TERMINAL else None
    if state == "CANCELLED" and start is None:
        end = end or epoch(meta.get("creationTimestamp"))
    live = [p for p in pods if _live(p)] if state == "RUNNING" else pods
    nodes = sorted(
        {str(p["spec"]["nodeName"]) for p in live if (p.get("spec") or {}).get("nodeName")}
    )
    code = _exit_code(pods) if state in ("FAILED", "TIMEOUT", "COMPLETED") else None
    gpus = int(known.get("gpus") or 0)
    cpus = int(known.get("cpus") or 1)
    submit = known.get("submit_epoch") or epoch(meta.get("creationTimestamp"))
    record: JobRecord = {
        "job_id": job_id,
        "display_id": str(job_id),
        "array_job_id": None,
        "array_task_id": None,
        "array_task_string": None,
        "name": str(known.get("name") or meta.get("name") or ""),
        "user": str(known.get("user") or ""),
        "uid": known.get("uid"),
        "account": str(known.get("account") or ""),
        "state": state,
        "ending": None,
        "reason": reason,
        "partition": str(known.get("partition") or ""),
        "qos": str(known.get("qos") or ""),
        "nice": 0,
        "held": held,
        "gpus": gpus,
        "gpu_ids": [],
        "gpu_type": known.get("gpu_type"),
        "gpu_share": None,
        "gpu_mem_peak_mb": None,
        "cpus": cpus,
        "mem_mb": known.get("mem_mb"),
        "ntasks": known.get("ntasks"),
        "node": ",".join(nodes) or None,
        "nodes": nodes,
        "node_count": int(known.get("node_count") or max(1, len(nodes))),
        "time_limit_s": known.get("time_limit_s"),
        "exit_code": code,
        "signal": None,
        **run_times(submit, start, end, now, gpus, cpus),
        "restart_count": int(annotations.get(RESTARTS_ANNOTATION) or 0)
        + int((obj.get("status") or {}).get("restarts") or 0),  # JobSet's (auto-resume)
        "dependency": None,
        "stdout": None,
        "stderr": None,
        "work_dir": str(known.get("work_dir") or ""),
        "comment": known.get("comment"),
        "wckey": known.get("wckey"),
        "begin_epoch": None,  # Kubernetes has no --begin
        "mem_per": None,
        "gpus_per_node": known.get("gpus_per_node"),
    }
    extra: dict[str, Any] = dict(record)
    extra["kind"] = obj.get("kind")
    extra["k8s_name"] = meta.get("name")
    extra["namespace"] = meta.get("namespace")
    extra["kueue"] = kueue
    extra["pods"] = sorted(str(p["metadata"]["name"]) for p in (live or pods))
    extra.update(elastic_fields(obj))
    return extra


def _live(pod: Obj) -> bool:
    """A pod that holds its node: not ended, not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Running") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def _state(
    obj: Obj, workload: Obj | None, pods: list[Obj]
) -> tuple[str, str | None, bool, dict[str, Any] | None]:
    """(state, reason, held, what Kueue said) as the module's table says."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    said = _kueue(workload)
    if CANCELLED_ANNOTATION in annotations:
        return "CANCELLED", None, False, said
    done = condition(obj, "Complete") or condition(obj, "Completed")
    if done is not None:
        return "COMPLETED", None, False, said
    failed = condition(obj, "Failed")
    if failed is not None:
        timed_out = failed.get("reason") == "DeadlineExceeded" or any(
            (p.get("status") or {}).get("reason") == "DeadlineExceeded" for p in pods
        )
        return ("TIMEOUT" if timed_out else "FAILED"), None, False, said
    if workload is None:
        return "PENDING", "None", False, None
    if (workload.get("spec") or {}).get("active") is False:
        return "PENDING", "JobHeldUser", True, said
    if condition(workload, "Admitted") is not None:
        return "RUNNING", None, False, said
    evicted = condition(workload, "Evicted")
    if evicted is not None and evicted.get("reason") not in ("Deactivated", "InactiveWorkload"):
        # (a deactivation's eviction stays on the Workload after it is released)
        why = str(evicted.get("reason") or "Evicted")
        return "PENDING", ("Preempted" if why == "Preempted" else why), False, said
    reserved = condition_of(workload, "QuotaReserved")
    message = str((reserved or {}).get("message") or "")
    if any(word in message for word in _INADMISSIBLE):
        return "PENDING", "PartitionConfig", False, said
    return "PENDING", "Resources" if reserved is not None else "Priority", False, said


def _kueue(workload: Obj | None) -> dict[str, Any] | None:
    """The Workload's name and its latest condition (what Kueue last said)."""
    if workload is None:
        return None
    conditions = (workload.get("status") or {}).get("conditions") or []
    latest: dict[str, Any] = max(
        conditions, key=lambda c: str(c.get("lastTransitionTime") or ""), default={}
    )
    return {
        "workload": (workload.get("metadata") or {}).get("name"),
        "condition": latest.get("type"),
        "status": latest.get("status"),
        "reason": latest.get("reason"),
        "message": latest.get("message"),
    }


def _start(obj: Obj, workload: Obj | None, pods: list[Obj]) -> float | None:
    kept = ((obj.get("metadata") or {}).get("annotations") or {}).get(STARTED_ANNOTATION)
    if kept:
        return float(kept)
    admitted = condition(workload, "Admitted")
    if admitted is not None:
        return epoch(admitted.get("lastTransitionTime"))
    started = [epoch((p.get("status") or {}).get("startTime")) for p in pods]
    found = [s for s in started if s is not None]
    if found:
        return min(found)
    return epoch((obj.get("status") or {}).get("startTime"))


def _end(obj: Obj, annotations: dict[str, str]) -> float | None:
    if CANCELLED_ANNOTATION in annotations:
        try:
            return float(annotations[CANCELLED_ANNOTATION])
        except ValueError:
            return None
    for kind in ("Complete", "Completed", "Failed"):
        found = condition(obj, kind)
        if found is not None:
            return epoch(found.get("lastTransitionTime"))
    return epoch((obj.get("status") or {}).get("completionTime"))


def _exit_code(pods: list[Obj]) -> int | None:
    """The largest exit code of the pods' containers (0 when all ended well)."""
    codes = []
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            ended = (status.get("state") or {}).get("terminated")
            if ended is not None:
                codes.append(int(ended.get("exitCode") or 0))
    return max(codes) if codes else None


def node_record(node: Obj, pods: list[Obj], jobs: dict[str, int]) -> dict[str, Any]:
    """One Node as Podium's node record; `pods` are the pods bound to it that hold
    resources (not ended), `jobs` maps a pod's name to its Podium job id."""
    meta, spec, status = (
        node.get("metadata") or {},
        node.get("spec") or {},
        node.get("status") or {},
    )
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    allocatable = status.get("allocatable") or {}
    ready = condition_of(node, "Ready")
    reason = annotations.get(DRAIN_ANNOTATION)
    gpus_total = int(allocatable.get(GPU) or 0)
    used = {
        "cpus": sum(quantity(_request(p, "cpu")) for p in pods),
        "gpus": sum(int(quantity(_request(p, GPU))) for p in pods),
        "mem": sum(quantity(_request(p, "memory")) for p in pods) / 2**20,
    }
    if ready is None or ready.get("status") != "True":
        state = "down"
    elif spec.get("unschedulable"):
        state = "draining" if pods else "drained"
    elif pods:
        busy = used["gpus"] >= gpus_total and gpus_total > 0
        state = "allocated" if busy else "mixed"
    else:
        state = "idle"
    health_value = labels.get(HEALTH_LABEL)
    label = HEALTH_LABELS.get(str(health_value), "schedulable")
    if spec.get("unschedulable") and label == "schedulable":
        label = "unschedulable-drained"
    holders = [jobs[p["metadata"]["name"]] for p in pods if p["metadata"]["name"] in jobs]
    return {
        "node": meta.get("name") or "",
        "state": state,
        "reason": reason,
        "health": {
            "label": label,
            "fenced": label != "schedulable",
            "fault": reason if reason and reason.startswith("podium:") else None,
            "reason": reason,
            "since": None,
            "last_deep_check": labels.get("sagemaker.amazonaws.com/deep-health-check-status"),
            "recovery": "automatic",
        },
        "agent": health_value,
        "cpus_total": int(quantity(allocatable.get("cpu") or "0")),
        "cpus_alloc": int(-(-used["cpus"] // 1)),
        "mem_total_mb": int(quantity(allocatable.get("memory") or "0") / 2**20),
        "mem_alloc_mb": int(used["mem"]),
        "gpus_total": gpus_total,
        "gpus_used": used["gpus"],
        "gpu_type": labels.get("nvidia.com/gpu.product"),
        "features": sorted(k for k in labels if k.startswith("feature.")),
        "partitions": [],
        "gpus": [],
        "jobs": sorted(set(holders)),
        "taints": [t.get("key") for t in spec.get("taints") or []],
    }


def _request(pod: Obj, resource: str) -> str:
    total = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        requests = (container.get("resources") or {}).get("requests") or {}
        total += quantity(requests.get(resource) or "0")
    return str(total)


_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "m": 1e-3,
}


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("500m", "16Gi", "8") as a number."""
    value = str(text).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * _SUFFIXES[suffix]
    return float(value or 0)
