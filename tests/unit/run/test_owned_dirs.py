"""A user's own directories under a shared (1777) state directory: made or found, then
checked on their descriptors, so nothing another user made first is used (issue 60,
item 1). Another user is another uid: a directory chowned to it where the test runs
as root, else the check asked for a uid that is not ours."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from podium.run.files import read_json_safely
from podium.run.owned_dirs import Squatted, new_file, owned_dir, reclaimed_dir, under

ROOT = os.geteuid() == 0
OTHER = 65534  # nobody: the other user


def _shared(tmp_path: Path) -> Path:
    base = tmp_path / "state"
    base.mkdir()
    base.chmod(0o1777)
    return base


def _theirs(path: Path, mode: int = 0o777) -> None:
    """`path` made by the other user (as root: chowned to them)."""
    path.mkdir()
    path.chmod(mode)
    os.chown(path, OTHER, OTHER)


def test_a_users_directories_are_made_private_and_found_again(tmp_path: Path) -> None:
    base = _shared(tmp_path)
    made = owned_dir(base, ("user-alice", "slurm-jobs", "7.0"))
    assert made == base / "user-alice" / "slurm-jobs" / "7.0" and made.is_dir()
    for path in (base / "user-alice", made.parent, made):
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o700
    assert owned_dir(base, ("user-alice", "slurm-jobs", "7.0")) == made  # idempotent


@pytest.mark.skipif(not ROOT, reason="needs root to make a directory another user's")
def test_a_directory_another_user_made_first_is_refused_by_name(tmp_path: Path) -> None:
    base = _shared(tmp_path)
    _theirs(base / "user-root")
    with pytest.raises(Squatted) as refused:
        owned_dir(base, ("user-root", "slurm-jobs"))
    message = str(refused.value)
    assert f"{base / 'user-root'} is uid {OTHER}" in message and "\n" not in message
    assert "an administrator removes it" in message
    assert list((base / "user-root").iterdir()) == []  # nothing made in theirs


def test_another_uid_is_refused_where_the_test_cannot_chown(tmp_path: Path) -> None:
    base = _shared(tmp_path)
    (base / "user-bob").mkdir(mode=0o700)
    with pytest.raises(Squatted, match="user-bob is uid"):
        owned_dir(base, ("user-bob",), uid=os.geteuid() + 1)


def test_a_link_a_file_or_a_writable_part_is_refused(tmp_path: Path) -> None:
    base = _shared(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (base / "user-link").symlink_to(elsewhere)
    with pytest.raises(Squatted, match="is a link or not a directory"):
        owned_dir(base, ("user-link", "slurm-jobs"))
    assert list(elsewhere.iterdir()) == []
    (base / "user-file").write_text("")
    with pytest.raises(Squatted, match="is a link or not a directory"):
        owned_dir(base, ("user-file",))
    (base / "user-open").mkdir()
    (base / "user-open").chmod(0o777)
    with pytest.raises(Squatted, match=r"writable by others .*chmod go-w"):
        owned_dir(base, ("user-open", "slurm-jobs"))
    with pytest.raises(Squatted, match="plain names"):
        owned_dir(base, ("user-x", ".."))


def test_a_shared_directory_without_the_sticky_bit_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "open"
    base.mkdir()
    base.chmod(0o777)
    with pytest.raises(Squatted, match="sticky bit"):
        owned_dir(base, ("user-alice",))


def test_a_new_file_replaces_what_stood_at_its_name_without_opening_it(tmp_path: Path) -> None:
    mine = owned_dir(_shared(tmp_path), ("user-alice",))
    victim = tmp_path / "victim"
    victim.write_text("theirs")
    os.link(victim, mine / "script")  # a hard link to another file
    new_file(mine, "script", b"#!/bin/sh\n", mode=0o700)
    assert victim.read_text() == "theirs"
    assert (mine / "script").read_bytes() == b"#!/bin/sh\n"
    os.unlink(mine / "script")
    os.mkfifo(mine / "script")  # a FIFO: never opened, so never waited on
    new_file(mine, "script", b"x")
    assert stat.S_ISREG(os.lstat(mine / "script").st_mode)
    assert [p.name for p in mine.iterdir()] == ["script"]  # no temporary left


def test_the_parts_below_a_base(tmp_path: Path) -> None:
    assert under(tmp_path, tmp_path / "user-a" / "ckpt" / "9") == ("user-a", "ckpt", "9")
    assert under(tmp_path, tmp_path / "user-a" / ".." / "user-b") == ("user-b",)
    assert under(tmp_path / "state", tmp_path / "elsewhere") is None


@pytest.mark.skipif(not ROOT, reason="needs root to make a directory another user's")
def test_the_hooks_own_directory_taken_first_is_moved_aside(tmp_path: Path) -> None:
    base = _shared(tmp_path)
    _theirs(base / "nodes")
    (base / "nodes" / "health.jsonl").symlink_to("/etc/passwd")
    ours = reclaimed_dir(base, "nodes")
    assert os.lstat(ours).st_uid == 0 and list(ours.iterdir()) == []
    aside = [p for p in base.iterdir() if p.name.startswith(f"nodes.squatted-{OTHER}-")]
    assert len(aside) == 1 and (aside[0] / "health.jsonl").is_symlink()
    assert reclaimed_dir(base, "nodes") == ours  # ours now: kept


def test_root_reads_what_a_user_left_without_waiting_or_following(tmp_path: Path) -> None:
    (tmp_path / "ok.json").write_text('[{"generation": 1}]')
    assert read_json_safely(tmp_path / "ok.json") == [{"generation": 1}]
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "link.json").symlink_to(tmp_path / "ok.json")
    (tmp_path / "big.json").write_text("[" + "1," * 1000 + "1]")
    (tmp_path / "dir.json").mkdir()
    done: list[object] = []
    reader = threading.Thread(
        target=lambda: done.extend(
            read_json_safely(tmp_path / n, limit=100)
            for n in ("fifo.json", "link.json", "big.json", "dir.json", "none.json")
        ),
        daemon=True,
    )
    started = time.monotonic()
    reader.start()
    reader.join(5)
    assert done == [None] * 5 and time.monotonic() - started < 1
