"""Kubernetes objects -> Podium's records: Kueue's states in Slurm's words, the record's
documented keys and types whatever the state, and nodes from Node objects."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podium.backends.kubernetes.parse import job_record, node_record, quantity
from tests.unit.test_records import problems

NOW = 1_800_000_100.0
KNOWN = {
    "name": "llama",
    "user": "alice",
    "uid": 1000,
    "account": "team-a",
    "qos": "high",
    "partition": "default",
    "gpus": 16,
    "cpus": 8,
    "mem_mb": 1024,
    "ntasks": 2,
    "node_count": 2,
    "time_limit_s": 600,
    "work_dir": "/w",
    "submit_epoch": 1_800_000_000.0,
}


def cond(
    kind: str,
    status: str = "True",
    reason: str = "",
    message: str = "",
    at: str = "2027-01-15T08:00:10Z",
) -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
    }


def jobset(conditions: list[dict[str, str]] | None = None, **annotations: str) -> dict[str, Any]:
    return {
        "kind": "JobSet",
        "metadata": {
            "name": "llama-7",
            "namespace": "default",
            "uid": "u1",
            "creationTimestamp": "2027-01-15T08:00:00Z",
            "labels": {"podium.dev/job-id": "7"},
            "annotations": {"podium.dev/record": json.dumps(KNOWN), **annotations},
        },
        "status": {"conditions": conditions or []},
    }


def workload(*conditions: dict[str, str], active: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": "jobset-llama-7-abc"},
        "spec": {"active": active},
        "status": {"conditions": list(conditions)},
    }


def pod(node: str, exit_code: int | None = None, reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"startTime": "2027-01-15T08:00:11Z"}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code}}}]
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": f"llama-7-{node}"}, "spec": {"nodeName": node}, "status": status}


MISSING = "LocalQueue team doesn't exist"
QUOTA = "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu"

CASES = {
    "not seen by Kueue yet": (jobset(), None, [], "PENDING", "None"),
    "waiting for quota": (
        jobset(),
        workload(cond("QuotaReserved", "False", "Pending", QUOTA)),
        [],
        "PENDING",
        "Resources",
    ),
    "local queue missing": (
        jobset(),
        workload(cond("QuotaReserved", "False", "Inadmissible", MISSING)),
        [],
        "PENDING",
        "PartitionConfig",
    ),
    "held": (jobset(), workload(active=False), [], "PENDING", "JobHeldUser"),
    "released after a hold": (
        jobset(),
        workload(
            cond("Evicted", reason="Deactivated"), cond("QuotaReserved", "False", "Pending", QUOTA)
        ),
        [],
        "PENDING",
        "Resources",
    ),
    "preempted": (
        jobset(),
        workload(
            cond("Evicted", reason="Preempted"), cond("QuotaReserved", "False", "Pending", QUOTA)
        ),
        [],
        "PENDING",
        "Preempted",
    ),
    "admitted": (
        jobset(),
        workload(cond("QuotaReserved"), cond("Admitted")),
        [pod("n1"), pod("n2")],
        "RUNNING",
        None,
    ),
    "completed": (
        jobset([cond("Completed", at="2027-01-15T08:01:10Z")]),
        workload(cond("Admitted")),
        [pod("n1", 0), pod("n2", 0)],
        "COMPLETED",
        None,
    ),
    "failed": (
        jobset([cond("Failed")]),
        workload(cond("Admitted")),
        [pod("n1", 0), pod("n2", 3)],
        "FAILED",
        None,
    ),
    "past its deadline": (
        jobset([cond("Failed")]),
        workload(cond("Admitted")),
        [pod("n1", 137, "DeadlineExceeded")],
        "TIMEOUT",
        None,
    ),
    "cancelled while running": (
        jobset(**{"podium.dev/cancelled": "1800000070.5", "podium.dev/started": "1800000010"}),
        workload(active=False),
        [],
        "CANCELLED",
        None,
    ),
    "cancelled while waiting": (
        jobset(**{"podium.dev/cancelled": "1800000070.5"}),
        None,
        [],
        "CANCELLED",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_kueue_states_map_to_slurm_words(case: str) -> None:
    obj, wl, pods, state, reason = CASES[case]
    record = job_record(obj, wl, pods, NOW)
    assert (record["state"], record["reason"]) == (state, reason)
    assert problems(record) == []
    assert record["job_id"] == 7 and record["user"] == "alice" and record["gpus"] == 16


def test_times_exit_codes_and_charges() -> None:
    done = job_record(*CASES["completed"][:3], NOW)
    assert done["start_epoch"] == 1_800_000_010.0  # Admitted at 08:00:10
    assert done["end_epoch"] - done["start_epoch"] == 60.0 and done["gpu_seconds"] == 960.0
    assert done["exit_code"] == 0 and done["nodes"] == ["n1", "n2"] and done["node"] == "n1,n2"
    assert job_record(*CASES["failed"][:3], NOW)["exit_code"] == 3
    cancelled = job_record(*CASES["cancelled while running"][:3], NOW)
    assert (cancelled["start_epoch"], cancelled["end_epoch"]) == (1_800_000_010.0, 1_800_000_070.5)
    waited = job_record(*CASES["cancelled while waiting"][:3], NOW)
    assert waited["start_epoch"] is None and waited["elapsed_s"] == 0.0
    pending = job_record(*CASES["waiting for quota"][:3], NOW)
    assert pending["kueue"]["message"] == QUOTA and pending["start_epoch"] is None


def node(
    unschedulable: bool = False, ready: str = "True", health: str | None = None
) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    if health:
        labels["sagemaker.amazonaws.com/node-health-status"] = health
    return {
        "metadata": {
            "name": "n1",
            "labels": labels,
            "annotations": {"podium.dev/drain-reason": "fan"} if unschedulable else {},
        },
        "spec": {"unschedulable": unschedulable} if unschedulable else {},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def running_pod(gpus: str) -> dict[str, Any]:
    container = {
        "resources": {"requests": {"cpu": "500m", "memory": "16Gi", "nvidia.com/gpu": gpus}}
    }
    return {"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [container]}}


@pytest.mark.parametrize(
    ("obj", "pods", "state", "label"),
    [
        (node(), [], "idle", "schedulable"),
        (node(), [running_pod("4")], "mixed", "schedulable"),
        (node(), [running_pod("8")], "allocated", "schedulable"),
        (node(unschedulable=True), [], "drained", "unschedulable-drained"),
        (node(unschedulable=True), [running_pod("8")], "draining", "unschedulable-drained"),
        (node(ready="Unknown"), [], "down", "schedulable"),
        (node(health="UnschedulablePendingReboot"), [], "idle", "unschedulable-pending-reboot"),
    ],
)
def test_nodes(obj: dict[str, Any], pods: list[dict[str, Any]], state: str, label: str) -> None:
    record = node_record(obj, pods, {"p": 7})
    assert (record["state"], record["health"]["label"]) == (state, label)
    assert record["gpus_total"] == 8 and record["mem_total_mb"] == 512 * 1024
    if pods:
        assert record["cpus_alloc"] == 1 and record["mem_alloc_mb"] == 16 * 1024
        assert record["jobs"] == [7]


@pytest.mark.parametrize(
    ("text", "value"), [("8", 8), ("500m", 0.5), ("16Gi", 16 * 2**30), ("1k", 1000), (3, 3)]
)
def test_quantities(text: str, value: float) -> None:
    assert quantity(text) == value
