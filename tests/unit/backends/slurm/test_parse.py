"""Slurm's JSON (22.05 as recorded from a real cluster, and the v0.0.39+ shapes)."""

from __future__ import annotations

import json
from pathlib import Path

from podium.backends.slurm import parse, slurm_values

DATA = Path(__file__).with_name("data")


def _doc(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((DATA / name).read_text())  # type: ignore[no-any-return]


def test_hostlist_expands_ranges_and_padding() -> None:
    assert parse.hostlist("node[1-3,5],gpu07") == ["node1", "node2", "node3", "node5", "gpu07"]
    assert parse.hostlist("q-st-g-[08-10]") == ["q-st-g-08", "q-st-g-09", "q-st-g-10"]
    assert parse.hostlist("") == []


def test_exit_status_from_wait_status_and_objects() -> None:
    assert slurm_values.exit_status(768) == (3, None)  # 22.05: raw wait status
    assert slurm_values.exit_status(9) == (None, 9)
    assert slurm_values.exit_status({"status": "FAILED", "return_code": 3}) == (3, None)
    assert slurm_values.exit_status(
        {"return_code": {"set": True, "infinite": False, "number": 0}, "signal": {"id": 9}}
    ) == (0, 9)


def test_squeue_22_05_jobs() -> None:
    jobs = {
        j["job_id"]: parse.job_record(j, 1795266920.0) for j in _doc("squeue-22.05.json")["jobs"]
    }
    running = jobs[3]
    assert running["state"] == "RUNNING" and running["name"] == "x y"
    assert running["nodes"] == ["node1", "node2"] and running["node_count"] == 2
    assert running["gpus"] == 2 and running["gpu_ids_by_node"] == {"node1": [0], "node2": [0]}
    assert running["mem_mb"] == 512 and running["ntasks"] == 2
    assert running["time_limit_s"] == 525600 * 60
    held = jobs[4]
    assert held["state"] == "PENDING" and held["held"] and held["start_time"] is None
    assert held["node"] is None and held["nodes"] == []
    done = jobs[2]
    assert done["state"] == "COMPLETED" and done["exit_code"] == 0 and done["gpus"] == 2


def test_newer_shapes_numbers_states_and_exit_codes() -> None:
    job = {
        "job_id": 9,
        "name": "n",
        "job_state": ["FAILED"],
        "nodes": "a[1-2]",
        "node_count": {"set": True, "infinite": False, "number": 2},
        "submit_time": {"set": True, "infinite": False, "number": 100},
        "start_time": {"set": True, "infinite": False, "number": 110},
        "end_time": {"set": True, "infinite": False, "number": 130},
        "time_limit": {"set": False, "infinite": True, "number": 0},
        "exit_code": {"status": ["FAILED"], "return_code": {"set": True, "number": 3}},
        "tres_per_job": "gres/gpu:4",
        "standard_output": "/tmp/%x-%j.out",
    }
    record = parse.job_record(job, 200.0)
    assert record["state"] == "FAILED" and record["exit_code"] == 3
    assert record["elapsed_s"] == 20 and record["time_limit_s"] is None
    assert record["stdout"] == "/tmp/n-9.out"
    assert record["gpus"] == 4  # "gres/gpu:4": the spelling of later versions


def test_sinfo_nodes_with_gpu_owners_and_labels() -> None:
    jobs = [parse.job_record(j, 1795266920.0) for j in _doc("squeue-22.05.json")["jobs"]]
    nodes = {n["name"]: parse.node_record(n, jobs) for n in _doc("sinfo-22.05.json")["nodes"]}
    first = nodes["node1"]
    assert first["gpus_total"] == 4 and first["partitions"] == ["debug", "low", "high"]
    assert first["gpus"][0]["job_id"] == 3 and first["gpus"][1]["job_id"] is None
    assert first["health"]["label"] == "schedulable"
    drained = parse.node_record(
        {"name": "x", "state": "idle", "state_flags": ["DRAIN"], "reason": "podium: xid: Xid 79"},
        [],
    )
    assert drained["state"] == "drained"
    assert drained["health"]["label"] == "unschedulable-pending-reset"
    admin = parse.node_record({"name": "x", "state": ["MIXED", "DRAIN"], "reason": "cabling"}, [])
    assert admin["state"] == "draining" and admin["health"]["label"] == "unschedulable-drained"
    down = parse.node_record({"name": "x", "state": "down", "reason": "Not responding"}, [])
    assert down["state"] == "down" and down["health"]["label"] == "unschedulable-down"


def test_jobcomp_lines() -> None:
    lines = (DATA / "jobcomp-22.05.txt").read_text().splitlines()
    records = [parse.jobcomp_record(line) for line in lines]
    assert [r["state"] for r in records if r] == ["COMPLETED", "COMPLETED", "CANCELLED"]
    assert records[0] is not None and records[0]["job_id"] == 15 and records[0]["exit_code"] == 0
    assert parse.jobcomp_record("garbage") is None
