"""podium.server.launch.own_checkpoint_dir: a job's checkpoint directory is its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from podium.server.launch import ForeignDirectory, own_checkpoint_dir


def test_a_new_directory_is_made_and_the_jobs_own_is_kept(tmp_path: Path) -> None:
    me, group = os.getuid(), os.getgid()
    path = tmp_path / "checkpoints" / "7"
    own_checkpoint_dir(path, me, group)
    (path / "ckpt.pt").write_text("step 100")
    own_checkpoint_dir(path, me, group)  # a requeue of the same job keeps it
    assert (path / "ckpt.pt").read_text() == "step 100"


def test_another_users_directory_or_a_link_is_never_adopted(tmp_path: Path) -> None:
    mine = tmp_path / "1"
    mine.mkdir()
    (mine / "private.pt").write_text("alice's")
    with pytest.raises(ForeignDirectory, match=r"1 already exists and is not its user's"):
        own_checkpoint_dir(mine, os.getuid() + 1, os.getgid())
    assert (mine / "private.pt").read_text() == "alice's"
    link = tmp_path / "2"
    link.symlink_to(mine)
    with pytest.raises(ForeignDirectory):
        own_checkpoint_dir(link, os.getuid(), os.getgid())
