from __future__ import annotations

from pathlib import Path

from podium.spec.job import ArraySpec, JobSpec, JobState
from podium.store.db import RunningStart, Store


def spec(**kw: object) -> JobSpec:
    base = dict(
        name="j",
        script="#!/bin/sh\n",
        work_dir="/tmp",
        submit_dir="/tmp",
        mem_mb=100,
        partition="main",
        qos="normal",
        account="a",
    )
    base.update(kw)
    return JobSpec(**base)  # type: ignore[arg-type]


def test_wal_and_array_insert(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    ids = store.insert_jobs(
        spec(array=ArraySpec(indices=(0, 3, 5), throttle=2)), uid=1, gid=1, user="u", now=1.0
    )
    rows = store.jobs_by_ids([ids[0]])
    assert [r["array_task_id"] for r in rows] == [0, 3, 5]
    assert {r["array_job_id"] for r in rows} == {ids[0]}
    assert store.array_members([ids[0]]) == {ids[0]: tuple(ids)}


def test_a_job_starts_at_most_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    (job_id,) = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    start = RunningStart(job_id, "n", (0,), 1, 1, "o", "e")
    assert store.mark_running([start], now=2.0) == [job_id]
    assert store.mark_running([start], now=2.5) == []  # no longer pending: not started twice
    assert store.mark_ended(job_id, state=JobState.COMPLETED, exit_code=0, signal=None, end_time=3)
    assert not store.mark_ended(job_id, state=JobState.FAILED, exit_code=1, signal=None, end_time=4)
    assert store.job(job_id)["state"] == "COMPLETED"
    kinds = [e["kind"] for e in store.events(job_id)]
    assert kinds == ["submit", "start", "end"]


def test_state_survives_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    ids = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    store.close()
    assert Store(tmp_path / "db").job(ids[0])["state"] == "PENDING"
