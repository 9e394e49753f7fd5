"""The daemon's state directory under an admin's hands (issue 26, items 2, 4 and 8): a
database moved aside, damaged, of a newer version or another program's, and a state
disk that filled while the daemon was down."""

from __future__ import annotations

import os
import pwd
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_permissions import _run, other_user
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest


def _stop(c: Cluster) -> None:
    """Stop the daemon and wait until its process (and its database connection) is gone."""
    pid = c.daemon_pid
    c.stop()
    wait_until(lambda: pid is None or not Path(f"/proc/{pid}").exists(),
               "the daemon to exit", 20)  # fmt: skip


def _move_db_aside(c: Cluster) -> None:
    """What the daemon tells an admin to do with a damaged database."""
    _stop(c)
    for suffix in ("", "-wal", "-shm"):
        db = c.home / f"podium.db{suffix}"
        if db.exists():
            db.rename(db.with_name(db.name + ".old"))


def test_a_new_database_never_gives_an_id_or_checkpoints_twice(
    cluster: Cluster, other_user: str
) -> None:
    c = cluster
    first = c.submit("--wrap", 'echo mine > "$PODIUM_CHECKPOINT_DIR/ckpt.pt"; '
                     'echo secret > "$PODIUM_CHECKPOINT_DIR/private.pt"')  # fmt: skip
    assert c.wait(first)["state"] == "COMPLETED"
    kept = c.home / "checkpoints" / str(first)
    _move_db_aside(c)
    c.start()
    look = 'ls -A "$PODIUM_CHECKPOINT_DIR"; echo "dir=$PODIUM_CHECKPOINT_DIR"'
    done = _run(c, other_user, "submit", "--parsable", "-o", "look-%j.out", "--wrap", look)
    assert done.returncode == 0, done.stderr
    theirs = int(done.stdout)
    assert theirs > first
    assert c.wait(theirs)["state"] == "COMPLETED"
    out = (c.work / f"look-{theirs}.out").read_text().split()
    assert out == [f"dir={c.home / 'checkpoints' / str(theirs)}"]  # empty, and its own
    assert (kept / "ckpt.pt").read_text() == "mine\n"
    assert (kept / "private.pt").read_text() == "secret\n"
    assert (c.home / "checkpoints" / str(theirs)).stat().st_uid == pwd.getpwnam(other_user).pw_uid
    # A directory that is not the job's user's is never adopted: the job is held, why.
    foreign = c.home / "checkpoints" / str(theirs + 1)
    foreign.mkdir()
    (foreign / "ckpt.pt").write_text("root's")
    done = _run(c, other_user, "submit", "--parsable", "--wrap", "true")
    held = int(done.stdout)
    assert held == theirs + 1
    c.wait(held, {"PENDING"})
    poll(lambda: c.job(held), lambda j: "checkpoint directory" in j["reason"],
         "held for its checkpoint directory", 20)  # fmt: skip
    assert c.job(held)["held"] and "is not its user's" in c.job(held)["reason"]
    assert (foreign / "ckpt.pt").read_text() == "root's" and foreign.stat().st_uid == 0


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("DROP TABLE events", "is damaged (its table events is missing)"),
        ("PRAGMA user_version=999", "was written by a newer Podium (schema 999"),
        ("foreign", "is not a Podium database (tables photos)"),
    ],
)
def test_up_refuses_a_database_it_must_not_use_in_one_line(damage: str, why: str) -> None:
    c = make_cluster()
    db = c.home / "podium.db"
    try:
        if damage == "foreign":
            with sqlite3.connect(db) as conn:
                conn.execute("CREATE TABLE photos (id INTEGER, data BLOB)")
        else:
            c.start()
            c.submit("--hold", "--wrap", "true")
            _stop(c)
            conn = sqlite3.connect(db)
            conn.execute(damage)
            conn.commit()
            conn.close()  # the last connection: its WAL is written back and removed
        before = db.read_bytes()
        result = c.cli("up")
        line = result.stderr.strip()
        assert result.returncode == 1 and "\n" not in line and why in line, line
        assert str(db) in line and "Traceback" not in line
        assert db.read_bytes() == before and not (c.home / "podium.sock").exists()
    finally:
        teardown_cluster(c)


def test_up_on_a_full_state_disk_spends_the_reserve_and_records_outcomes() -> None:
    mount = Path(tempfile.mkdtemp(prefix="podium-tmpfs-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)]).returncode:
        os.rmdir(mount)
        pytest.skip("cannot mount a tmpfs here")
    c = make_cluster()
    home = mount / "home"
    subprocess.run(["cp", "-a", str(c.home), str(home)], check=True)
    state = Cluster(home, c.work)
    state.env["PODIUM_HOME"] = str(home)
    try:
        state.start()
        jobs = [state.submit("--wrap", "sleep 2") for _ in range(3)]
        for job in jobs:
            state.wait(job, {"RUNNING"})
        _stop(state)  # the jobs keep running and end while the daemon is down
        subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'filler'}", "bs=1M"],
                       capture_output=True)  # fmt: skip
        results = [home / "jobs" / str(job) / "result.json" for job in jobs]
        wait_until(lambda: all(r.exists() for r in results), "the jobs end with no daemon")
        up = state.cli("up")
        assert up.returncode == 0, up.stderr
        for job in jobs:
            assert state.wait(job, timeout=30)["state"] == "COMPLETED"
        refused = state.cli("submit", "--wrap", "true")
        assert refused.returncode == 1 and "state disk is full" in refused.stderr
        assert refused.stderr.count("\n") == 1
        _stop(state)
        conn = sqlite3.connect(home / "podium.db")  # its WAL written back and removed:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # opening it needs room again
        conn.close()
        (home / "podium.reserve").unlink(missing_ok=True)  # spent: nothing left to spend
        subprocess.run(["dd", "if=/dev/zero", f"of={mount / 'filler2'}", "bs=1M"],
                       capture_output=True)  # fmt: skip
        again = state.cli("up")
        assert again.returncode == 1 and "its reserve is spent" in again.stderr
        assert again.stderr.strip().count("\n") == 0
    finally:
        teardown_cluster(state)
        subprocess.run(["umount", "-l", str(mount)])
        os.rmdir(mount)
        teardown_cluster(c)
