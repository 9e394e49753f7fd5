from __future__ import annotations

from pathlib import Path

from podium.api.selection import JobFilter
from podium.jobspec.job import ArraySpec, JobSpec, JobState
from podium.store.db import RunningStart, Store, spec_of
from podium.store.schema import SCHEMA_VERSION


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


def test_an_array_is_one_row_until_its_tasks_split_off(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    (array,) = store.insert_jobs(
        spec(array=ArraySpec.of((0, 3, 5, 6, 7), throttle=2)), uid=1, gid=1, user="u", now=1
    )
    (row,) = store.jobs_by_ids([array])
    assert (row["array_job_id"], row["array_task_id"], row["array_pending"]) == (
        array, None, "0,3,5-7")  # fmt: skip
    assert store.count_jobs(states=["PENDING"], user="u", qos="normal") == 5
    assert store.split_tasks(array, 1, now=2) == [array + 1]  # the lowest index first
    assert store.split_tasks(array, 1, now=2, index=3) == [array + 2]  # or the one asked
    assert store.split_tasks(array, 1, now=2, index=3) == []  # no longer pending
    assert store.job(array)["array_pending"] == "5-7"
    assert store.split_tasks(array, 9, now=3) == [array + 3, array + 4, array]  # the last: itself
    rows = {r["job_id"]: r for r in store.jobs_by_ids([array])}
    tasks = {r["array_task_id"]: j for j, r in rows.items()}
    assert tasks == {0: array + 1, 3: array + 2, 5: array + 3, 6: array + 4, 7: array}
    assert all(r["array_pending"] is None and r["array_throttle"] == 2 for r in rows.values())
    assert store.array_members([array]) == {array: tuple(sorted(rows))}
    assert store.count_jobs(states=["PENDING"], user="u", qos="normal") == 5
    assert store.split_tasks(array, 1, now=4) == []


def test_an_arrays_tasks_share_one_stored_spec_and_change_it_apart(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    (array,) = store.insert_jobs(
        spec(array=ArraySpec.of((0, 1, 2)), time_limit_s=600), uid=1, gid=1, user="u", now=1
    )
    first, second, last = store.split_tasks(array, 3, now=2)
    assert last == array
    stored = dict(store.conn.execute("SELECT job_id, spec FROM jobs").fetchall())
    assert stored[first] == stored[second] == ""  # written once, on the array's row
    assert spec_of(store.job(first)) == spec_of(store.job(array))
    assert [spec_of(r).name for r in store.jobs_by_ids([array], with_spec=True)] == ["j"] * 3

    assert store.set_time_limit(first, 60, "admin", 2.0)
    assert store.set_time_limit(array, 120, "admin", 3.0)  # the array's own row
    limits = [spec_of(store.job(j)).time_limit_s for j in (first, second, array)]
    assert limits == [60, 600, 120]
    assert [store.job(j)["time_limit_s"] for j in (first, second, array)] == [60, 600, 120]


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


def test_a_cancelled_running_job_lists_completing_until_it_ends(tmp_path: Path) -> None:
    """Issue 27, item 3: scancel gives a running job its end at once (COMPLETING in
    listings, CANCELLED to accounting) while its processes are stopped; the end,
    once recorded, clears it."""
    from podium.server.job_rows import job_record

    store = Store(tmp_path / "db")
    (job_id,) = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    store.mark_running([RunningStart(job_id, "n", (0,), 1, 1, "o", "e")], now=2.0)
    assert store.mark_ending(job_id, JobState.CANCELLED, now=3.0)
    (row,) = store.jobs(JobFilter(states=("COMPLETING",)))
    record = job_record(row, now=4.0)
    assert (record["state"], record["ending"]) == ("COMPLETING", "CANCELLED")
    assert store.jobs(JobFilter(states=("RUNNING",))) == [
        row
    ]  # the scheduler's view: still holding
    store.mark_ended(job_id, state=JobState.CANCELLED, exit_code=None, signal=None, end_time=5)
    record = job_record(store.job(job_id), now=6.0)
    assert (record["state"], record["ending"]) == ("CANCELLED", None)
    assert not store.mark_ending(job_id, JobState.CANCELLED, now=7.0)  # ended: no change
    assert [e["kind"] for e in store.events(job_id)] == ["submit", "start", "ending", "end"]


def test_state_survives_reopen(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    ids = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    store.close()
    assert Store(tmp_path / "db").job(ids[0])["state"] == "PENDING"


def test_requeue_keeps_exclusions_and_progress(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    [job] = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    start = RunningStart(job, "n0", (1,), 1, 100, "o", "e")
    assert store.mark_running([start], 2.0) == [job]
    assert store.requeue(
        job, 3.0, "NODE_FAIL", exclude=[("n0", 1)], checkpoint_mtime=2.5, stalled_restarts=1
    )
    row = store.job(job)
    assert (row["state"], row["restart_count"], row["exclude"]) == ("PENDING", 1, '[["n0", 1]]')
    assert (row["checkpoint_mtime"], row["stalled_restarts"]) == (2.5, 1)
    store.mark_running([start], 4.0)
    assert store.requeue(job, 5.0, "preempted")  # keeps what it does not name
    row = store.job(job)
    assert (row["exclude"], row["checkpoint_mtime"], row["restart_count"]) == (
        '[["n0", 1]]',
        2.5,
        2,
    )
    # its waits add up, each from its submission or requeue to its start (issue 62)
    assert (row["earlier_wait_seconds"], row["queued_at"]) == (1.0 + 1.0, 5.0)
    store.mark_running([start], 9.0)
    from podium.server.snapshot import allocation

    assert allocation(store.job(job), "n0", "none", set(), 10.0).waited_s == 2.0 + 4.0


def test_health_records_and_faults(tmp_path: Path) -> None:
    from podium.recover.ladder import Health, Label, Remedy
    from podium.store.health_table import HealthTable

    store = Store(tmp_path / "db")
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    table = HealthTable(store)
    assert table.get("n0", 2) == Health("n0", 2)
    fenced = Health("n0", 2, Label.PENDING_RESET, True, "xid-48", "health: x", Remedy.RESET, 9.0)
    table.put(fenced, 9.0, "fenced")
    table.put(Health("n0", None, Label.DRAINED, True, "disk"), 9.5)
    assert table.get("n0", 2) == fenced and table.get("n0", None).label is Label.DRAINED
    for t in (1.0, 5.0, 8.0):
        table.record_fault("n0", 2, "xid-48", "health: x", t)
    assert table.recent_faults("n0", 2, since=4.0) == 2
    assert table.recent_faults("n0", None, since=0.0) == 0
    kinds = [(e["kind"], e["detail"]) for e in store.events()]
    assert ("health", "GPU 2: fenced") in kinds


def test_a_submission_key_returns_the_first_jobs(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    ids = store.insert_jobs(spec(), uid=7, gid=7, user="u", now=1.0, idempotency_key="k" * 16)
    assert store.submitted(7, "k" * 16) == ids
    assert store.submitted(8, "k" * 16) is None  # keys are per user
    assert store.submitted(7, "other-key") is None


def test_empty_and_damaged_databases_are_refused(tmp_path: Path) -> None:
    import pytest

    from podium.errors import StoreError

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(StoreError, match=r"empty \(0 bytes\).*move it aside"):
        Store(empty)
    good = tmp_path / "good.db"
    store = Store(good)
    for i in range(300):
        store.insert_jobs(spec(name=f"j{i}", script="#!/bin/sh\n" + "x" * 500), uid=1, gid=1,
                          user="u", now=1.0)  # fmt: skip
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(good.read_bytes())
    data[4096 * 3 : 4096 * 6] = b"\xa5" * (4096 * 3)
    good.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="is damaged"):
        Store(good)


def test_a_spec_stored_with_every_index_listed_reads_as_ranges(tmp_path: Path) -> None:
    old = spec(array=ArraySpec.of(range(3))).model_dump(mode="json")
    old["array"] = {"indices": [0, 1, 2, 5], "throttle": None}  # how specs were stored before
    assert JobSpec.model_validate(old).array == ArraySpec(ranges="0-2,5")


def test_only_a_complete_podium_database_of_a_known_version_is_opened(tmp_path: Path) -> None:
    """Issue 26, item 4: a dropped table, a newer schema and another program's file are
    refused in one line, and each file is left exactly as it was."""
    import sqlite3

    import pytest

    from podium.errors import StoreError

    def made(name: str, *sql: str) -> Path:
        path = tmp_path / name
        Store(path).close()
        with sqlite3.connect(path) as conn:
            for statement in sql:
                conn.execute(statement)
        return path

    cases = {
        made("dropped.db", "DROP TABLE events"): r"is damaged \(its table events is missing\)",
        made("newer.db", "PRAGMA user_version=999"): r"newer Podium \(schema 999; this one",
        made("alien.db", "PRAGMA application_id=1234"): r"not a Podium database \(application",
    }
    foreign = tmp_path / "photos.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE photos (id INTEGER, data BLOB)")
    cases[foreign] = r"not a Podium database \(tables photos\)"
    for path, why in cases.items():
        before = path.read_bytes()
        with pytest.raises(StoreError, match=why) as refused:
            Store(path)
        assert "\n" not in str(refused.value) and str(path) in str(refused.value)
        assert path.read_bytes() == before
    # A database of an older version (no stamp) is migrated and stamped.
    old = made(
        "old.db",
        "PRAGMA application_id=0",
        "PRAGMA user_version=8",
        "DROP TABLE mig_layouts",
        "ALTER TABLE jobs DROP COLUMN ending",
        "ALTER TABLE jobs DROP COLUMN elastic_state",
        "ALTER TABLE jobs DROP COLUMN lost_work",
        "ALTER TABLE jobs DROP COLUMN earlier_gpu_seconds",
        "ALTER TABLE jobs DROP COLUMN expedite",
        "ALTER TABLE jobs DROP COLUMN earlier_wait_seconds",
        "ALTER TABLE jobs DROP COLUMN queued_at",
        "DROP TABLE tokens",
        "DROP TABLE sessions",
    )
    Store(old).close()
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA application_id").fetchone()[0] == int.from_bytes(b"PDM1")


def test_ids_continue_above_what_the_disk_holds(tmp_path: Path) -> None:
    """Issue 26, item 2: a database made anew on a used state directory never gives
    an id twice."""
    store = Store(tmp_path / "podium.db")
    assert not store.keep_ids_above(0)
    assert store.keep_ids_above(41)
    assert store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0) == [42]
    assert not store.keep_ids_above(10)  # never backwards
    assert store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0) == [43]
