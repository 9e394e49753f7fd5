"""Reading and checking as the job's user: a job's log tail (the dashboard's job page) and
the submit path's directory-check helper run with the user's identity. The log tail:
a file closed to that user, a link to one, a FIFO or a missing file yield a one-line
error, never the daemon's root view; a readable file yields its end and its size."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from podium.run.identity import Identity
from podium.run.tail_as_user import TailError, tail_as_user
from tests.workers import ensure_user

USER = "podium-test"


@pytest.fixture
def second_user() -> Identity:
    if os.geteuid() != 0:
        pytest.skip("needs root to read as a second Unix user")
    entry = ensure_user(USER)
    return Identity.of(entry.pw_uid, entry.pw_gid, USER)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that every user can enter (pytest's tmp_path is not)."""
    where = Path(tempfile.mkdtemp(prefix="podium-tail-", dir="/tmp"))
    where.chmod(0o755)
    yield where
    shutil.rmtree(where)


def test_reads_only_what_the_user_could(second_user: Identity, open_dir: Path) -> None:
    tmp_path = open_dir
    mine = tmp_path / "job.out"
    mine.write_text("".join(f"line {i}\n" for i in range(1000)))
    mine.chmod(0o644)
    data, size = tail_as_user(second_user, str(mine), 20)
    assert data.endswith(b"line 999\n")
    assert len(data) == 20 and size == mine.stat().st_size
    secret = tmp_path / "root-only"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    with pytest.raises(TailError, match="not readable by the job's user"):
        tail_as_user(second_user, str(secret), 100)
    link = tmp_path / "link.out"
    link.symlink_to(secret)
    with pytest.raises(TailError, match="symbolic link"):
        tail_as_user(second_user, str(link), 100)
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    with pytest.raises(TailError, match="not a regular file"):
        tail_as_user(second_user, str(fifo), 100)
    with pytest.raises(TailError, match="does not exist"):
        tail_as_user(second_user, str(tmp_path / "nothing"), 100)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    (closed / "job.out").write_text("hidden\n")
    with pytest.raises(TailError, match="directory is closed"):
        tail_as_user(second_user, str(closed / "job.out"), 100)
    with pytest.raises(TailError, match="not an absolute path"):
        tail_as_user(second_user, "relative.out", 100)


def test_the_directory_check_helper_answers_as_the_user(
    second_user: Identity, open_dir: Path
) -> None:
    """The submit path's helper (podium.run.dircheck_helper) runs with the user's ids:
    a directory only root may enter is closed to it, one the user may write is open."""
    from podium.run.dircheck_helper import DirCheckers

    checkers = DirCheckers()
    if not checkers.python:
        pytest.skip("no system Python for the helper")
    closed = open_dir / "closed"
    closed.mkdir(mode=0o700)
    mine = open_dir / "mine"
    mine.mkdir()
    os.chown(mine, second_user.uid, second_user.gid)
    try:
        assert checkers.ask(second_user, [f"d:{closed}"]) == ("denied", str(closed), "")
        assert checkers.ask(second_user, [f"w:{open_dir}"]) == ("readonly", str(open_dir), "")
        assert checkers.ask(second_user, [f"w:{mine}", f"o:{mine}/job.out"]) is None
        (helper,) = checkers._helpers.values()
        assert os.stat(f"/proc/{helper.proc.pid}").st_uid == second_user.uid
    finally:
        checkers.close()
