"""Parity: a job record has the same documented keys and types whichever backend made
it (`podium.api.records.JobRecord`): the embedded daemon's store row, Slurm's recorded
`squeue --json` and a `sacct --json` job, and jobcomp log lines."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

from podium.api.records import (
    JOB_KEYS,
    GpuRecord,
    HealthRecord,
    JobRecord,
    NodeRecord,
    WouldQueueRecord,
)
from podium.backends.slurm import parse
from podium.backends.slurm.backend import _sacct_record
from podium.jobspec.job import JobSpec, JobState
from podium.server.job_rows import job_record
from podium.store.db import RunningStart, Store

DATA = Path(__file__).resolve().parent / "backends" / "slurm" / "data"
HINTS = typing.get_type_hints(JobRecord)


def _fits(value: Any, hint: Any) -> bool:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return any(_fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is list:
        (inner,) = typing.get_args(hint)
        return isinstance(value, list) and all(_fits(v, inner) for v in value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint)
        return (
            isinstance(value, dict)
            and set(value) == set(fields)
            and all(_fits(value[k], h) for k, h in fields.items())
        )
    return isinstance(value, hint)


def problems(record: dict[str, Any]) -> list[str]:
    missing = [k for k in JOB_KEYS if k not in record]
    wrong = [
        f"{k}={record[k]!r} is not {HINTS[k]}"
        for k in JOB_KEYS
        if k in record and not _fits(record[k], HINTS[k])
    ]
    return [f"missing {k}" for k in missing] + wrong


def test_the_embedded_daemon_record(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    spec = JobSpec(
        name="j", script="#!/bin/sh\n", work_dir="/tmp", submit_dir="/tmp", mem_mb=100,
        partition="main", qos="normal", account="a", gpus=1, gpu_type="h100",
    )  # fmt: skip
    [job_id] = store.insert_jobs(spec, uid=1, gid=1, user="u", now=1.0)
    assert problems(job_record(store.job(job_id), 2.0)) == []  # pending
    store.mark_running([RunningStart(job_id, "n0", (0,), 1, 100, "/o", "/o", (1,))], 3.0)
    running = job_record(store.job(job_id), 4.0)
    assert problems(running) == [] and running["nodes"] == ["n0"]
    store.mark_ended(job_id, state=JobState.COMPLETED, exit_code=0, signal=None, end_time=5.0)
    assert problems(job_record(store.job(job_id), 6.0)) == []


def test_slurm_squeue_records() -> None:
    jobs = json.loads((DATA / "squeue-22.05.json").read_text())["jobs"]
    assert jobs
    for job in jobs:
        assert problems(parse.job_record(job, 1.8e9)) == [], job.get("job_id")


def test_slurm_sacct_record() -> None:
    sacct = {  # the shape `sacct --json` documents (23.02 and later)
        "job_id": 41,
        "name": "train",
        "user": "ada",
        "account": "lab",
        "partition": "gpu",
        "qos": "normal",
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "nodes": "node[1-2]",
        "time": {"submission": 1_800_000_000, "start": 1_800_000_010, "end": 1_800_000_070},
        "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
        "required": {"restarts": 0},
        "working_directory": "/home/ada",
        "comment": {"job": "sweep"},
    }
    assert problems(_sacct_record(sacct, 1.8e9)) == []


def test_slurm_jobcomp_records() -> None:
    lines = (DATA / "jobcomp-22.05.txt").read_text().splitlines()
    records = [parse.jobcomp_record(line) for line in lines]
    assert records and all(r is not None for r in records)
    for record in records:
        assert record is not None and problems(record) == [], record["job_id"]


# --- node records and --test-only replies ---------------------------------------------

NODE_HINTS = typing.get_type_hints(NodeRecord)
GPU_HINTS = typing.get_type_hints(GpuRecord)
HEALTH_HINTS = typing.get_type_hints(HealthRecord)


def node_problems(record: dict[str, Any]) -> list[str]:
    out = _check(record, NODE_HINTS, "node")
    out += _check(record["health"], HEALTH_HINTS, "health")
    for gpu in record["gpus"]:
        out += _check(gpu, GPU_HINTS, "gpu")
        out += _check(gpu["health"], HEALTH_HINTS, "gpu health")
    return out


def _check(record: dict[str, Any], hints: dict[str, Any], what: str) -> list[str]:
    """Missing keys and wrong types; nested records ("health", "gpus") are checked by
    the caller."""
    out = [f"{what}: missing {k}" for k in hints if k not in record]
    for key, hint in hints.items():
        if key in ("health", "gpus") or key not in record:
            continue
        if not _fits(record[key], hint):
            out.append(f"{what}: {key}={record[key]!r} is not {hint}")
    return out


def test_the_embedded_daemon_node_record(tmp_path: Path) -> None:
    from podium.server.views import Views
    from tests.unit.server.harness import Cluster

    c = Cluster(tmp_path)
    c.submit("--gpus=1")
    c.reactor.tick()
    (node,) = Views(c.reactor, lambda: None).nodes()
    assert node_problems(node) == []
    assert node["gpus_used"] == 1 and node["gpus"][0]["job_id"] is not None


def test_slurm_node_records_from_sinfo() -> None:
    data = json.loads((DATA / "sinfo-22.05.json").read_text())
    nodes = [parse.node_record(n, []) for n in data["nodes"]]
    assert nodes
    for node in nodes:
        assert node_problems(node) == []


def test_test_only_replies_agree() -> None:
    from podium.jobspec.test_only import test_only_answer

    spec = JobSpec(
        name="j", script="#!/bin/sh\n", work_dir="/tmp", submit_dir="/tmp", mem_mb=100,
        partition="main", qos="normal", account="a", gpus=2,
    )  # fmt: skip
    embedded = test_only_answer(spec)  # the embedded daemon's intake
    assert set(embedded) == set(WouldQueueRecord.__annotations__)
    assert embedded["state"] == "WOULD_QUEUE" and embedded["gpus"] == 2
    from podium.backends.kubernetes import backend as kueue_backend

    other = test_only_answer(spec, "(Slurm's default)", "(default)")
    assert set(other) == set(embedded) and other["gpus"] == 2 and other["partition"] == "main"
    intake = Path(parse.__file__).parents[2] / "server" / "intake.py"
    for source in (Path(parse.__file__).with_name("backend.py"), Path(kueue_backend.__file__),
                   intake):  # fmt: skip
        text = source.read_text()  # one builder for every backend
        assert "test_only_answer(" in text and "would_queue(" not in text, source
