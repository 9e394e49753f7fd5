"""Group commit (podium.store.group_commit): concurrent durable writes share a flush,
and none is acknowledged before a flush that began after its commit has ended."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from podium.errors import StoreError
from podium.store.db import Store
from tests.unit.store.test_db import spec


def test_concurrent_submits_share_flushes_and_none_returns_before_its_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "db")
    lock = threading.Lock()  # the daemon's lock
    committed: list[int] = []  # job ids in commit order
    flushed_upto: list[int] = []  # for each finished flush: commits made before it began
    real_fdatasync = os.fdatasync

    def slow_fdatasync(fd: int) -> None:
        began = len(committed)
        time.sleep(0.02)  # a disk that takes 20 ms to flush
        real_fdatasync(fd)
        flushed_upto.append(began)

    monkeypatch.setattr(os, "fdatasync", slow_fdatasync)
    late: list[str] = []

    def submit(n: int) -> None:
        for _ in range(n):
            with store.group_commit(), lock:
                (job_id,) = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1)
                committed.append(job_id)
                mine = len(committed)
                assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
            if max(flushed_upto, default=0) < mine:
                late.append(f"commit {mine} returned before a flush covered it")

    threads = [threading.Thread(target=submit, args=(10,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert late == []
    assert store.count_jobs(states=["PENDING"], user="u", qos="normal") == 80
    assert store.flushes == len(flushed_upto)
    assert store.flushes < 40, f"80 concurrent commits took {store.flushes} flushes"


def test_outside_a_group_commit_a_durable_write_flushes_itself(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    with store.transaction(durable=True) as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with store.group_commit(), store.transaction() as conn:
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1)
    assert store.flushes == 0
    with store.group_commit():
        pass  # nothing committed: nothing to flush
    assert store.flushes == 0
    with store.group_commit(), store.group_commit():  # nested: one
        store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1)
    assert store.flushes == 1


def test_a_failed_flush_is_an_error_and_the_next_request_flushes_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "db")
    real_fdatasync = os.fdatasync

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)
    flush_failed = pytest.raises(StoreError, match=r"failed to flush db-wal .*Input/output")
    with flush_failed, store.group_commit():
        store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1)
    monkeypatch.setattr(os, "fdatasync", real_fdatasync)
    with store.group_commit():
        store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1)
    assert store.flushes == 1
    assert store.count_jobs(states=["PENDING"], user="u", qos="normal") == 2
