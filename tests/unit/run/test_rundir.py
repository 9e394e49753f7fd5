"""Where running jobs' state lives (podium.run.rundir): chosen once, found again through
HOME/jobs, and a lost tmpfs told apart from a job that never started."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from podium.run import rundir
from podium.run.rundir import close_jobs_dir, mount_type, open_jobs_dir

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
tmpfs /run tmpfs rw,nosuid,nodev,mode=755 0 0
/dev/vdb /run/media\\040disk ext4 rw 0 0
"""


def test_the_mount_type_is_that_of_the_longest_mount_point_holding_the_path(
    tmp_path: Path,
) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text(MOUNTS)
    assert mount_type("/dev/shm/podium-0/x", str(mounts)) == "tmpfs"
    assert mount_type("/run/podium", str(mounts)) == "tmpfs"
    assert mount_type("/run/media disk/a", str(mounts)) == "ext4"
    assert mount_type("/runaway", str(mounts)) == "ext4"  # a prefix, not a parent
    assert mount_type("/x", str(tmp_path / "missing")) is None


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shared tmpfs base of our own, as /dev/shm/podium-0 is for a root daemon."""
    shared = tmp_path / "shm"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    monkeypatch.setattr(rundir, "tmpfs_base", lambda euid: shared / f"podium-{euid}")
    return shared / f"podium-{os.geteuid()}"


def test_job_state_goes_to_the_tmpfs_and_home_jobs_leads_there(tmp_path: Path, base: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    jobs = open_jobs_dir(home, "auto", runs_recorded=False)
    assert jobs.path.parent == base and not jobs.lost_runs
    assert (home / "jobs").resolve() == jobs.path
    assert oct(os.stat(base).st_mode & 0o777) == oct(0o711)
    assert oct(os.stat(jobs.path).st_mode & 0o777) == oct(0o711)
    (jobs.path / "7").mkdir()
    again = open_jobs_dir(home, "auto", runs_recorded=True)  # a restart: the same place
    assert again.path == jobs.path and not again.lost_runs and (again.path / "7").is_dir()


def test_a_vanished_tmpfs_loses_the_runs_it_held_and_says_so(tmp_path: Path, base: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    jobs = open_jobs_dir(home, "auto", runs_recorded=False)
    (jobs.path / "7").mkdir()
    import shutil

    shutil.rmtree(base)  # the machine restarted: the tmpfs is empty
    after = open_jobs_dir(home, "auto", runs_recorded=True)
    assert after.lost_runs and after.path.is_dir() and not (after.path / "7").exists()
    shutil.rmtree(base)
    quiet = open_jobs_dir(home, "auto", runs_recorded=False)  # nothing ran: nothing lost
    assert not quiet.lost_runs


def test_a_base_someone_else_made_first_is_not_used(
    tmp_path: Path, base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    base.symlink_to(tmp_path)  # planted in the world-writable parent
    jobs = open_jobs_dir(home, "auto", runs_recorded=False)
    assert jobs.path == home / "jobs" and not (home / "jobs").is_symlink()
    base.unlink()
    base.mkdir()
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)  # not ours: someone else's
    assert rundir.choose(home / "other", "auto") == home / "other" / "jobs"


def test_on_disk_state_of_an_older_version_stays_while_its_runs_are_recorded(
    tmp_path: Path, base: Path
) -> None:
    home = tmp_path / "home"
    (home / "jobs" / "3").mkdir(parents=True)
    kept = open_jobs_dir(home, "auto", runs_recorded=True)
    assert kept.path == home / "jobs" and (kept.path / "3").is_dir()
    moved = open_jobs_dir(home, "auto", runs_recorded=False)  # all recorded: move to tmpfs
    assert moved.path.parent == base and (home / "jobs").is_symlink()


def test_home_keeps_job_state_on_the_state_disk(tmp_path: Path, base: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    jobs = open_jobs_dir(home, "home", runs_recorded=False)
    assert jobs.path == home / "jobs" and not (home / "jobs").is_symlink()
    assert not base.exists()


def test_a_clean_stop_removes_an_empty_jobs_directory_and_keeps_one_in_use(
    tmp_path: Path, base: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    jobs = open_jobs_dir(home, "auto", runs_recorded=False)
    (jobs.path / "5").mkdir()
    close_jobs_dir(home, jobs.path)
    assert (jobs.path / "5").is_dir() and (home / "jobs").is_symlink()
    (jobs.path / "5").rmdir()
    (jobs.path / "launcher.log").write_text("")
    close_jobs_dir(home, jobs.path)
    assert not jobs.path.exists() and not (home / "jobs").exists()
