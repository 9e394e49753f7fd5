"""Parity: a job record has the same documented keys and types whichever backend made
it (`podium.api.records.JobRecord`): the embedded daemon's store row, Slurm's recorded
`squeue --json` and a `sacct --json` job, and jobcomp log lines."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

from podium.api.records import JOB_KEYS, JobRecord
from podium.server.records import job_record
from podium.slurm import parse
from podium.slurm.api import _sacct_record
from podium.spec.job import JobSpec, JobState
from podium.store.db import RunningStart, Store

DATA = Path(__file__).resolve().parent / "slurm" / "data"
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
