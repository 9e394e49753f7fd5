"""The daemon's home directory at start-up: the one-daemon lock, private state (umask
and modes), the store (spending the full-disk reserve when it must), and the highest
job id already on disk."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path

from podium.errors import PodiumError, StateDiskFull
from podium.store.database import reserve_path
from podium.store.db import Store

log = logging.getLogger("podium.daemon")


def take_instance_lock(home: Path) -> int:
    """Hold HOME/daemon.lock for the life of the process; exit if another daemon has it."""
    fd = os.open(home / "daemon.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise PodiumError(f"a Podium daemon is already running for {home}") from None
    return fd


def make_private(home: Path) -> None:
    """Keep the state private: everything the daemon creates is its owner's alone
    (umask 077). HOME and the jobs and checkpoints directories are 0711, so users reach
    the socket, their job's script and their checkpoints by name, and list nothing;
    state left readable by older versions is closed."""
    os.umask(0o077)
    home.mkdir(parents=True, exist_ok=True)
    for directory in (home, home / "checkpoints", home / "containers"):
        directory.mkdir(exist_ok=True)
        os.chmod(directory, 0o711)
    for name in PRIVATE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.chmod(home / name, 0o600)


def close_job_files(jobs: Path) -> None:
    """Close the daemon's files in job directories that older versions left readable."""
    for job_dir in jobs.iterdir():
        if not job_dir.is_dir():
            continue
        for name in JOB_PRIVATE_FILES:
            with contextlib.suppress(FileNotFoundError):
                os.chmod(job_dir / name, 0o600)


def open_store(path: Path) -> Store:
    """The daemon's store at `path`. On a full state disk, the reserve the last daemon
    kept back (podium.reserve) is spent to open it, as a running daemon spends it, so
    the outcomes of jobs that ended meanwhile are recorded; raises StateDiskFull where
    there is no reserve left to spend."""
    try:
        return Store(path)
    except StateDiskFull:
        try:
            reserve_path(path).unlink()
        except FileNotFoundError:
            raise StateDiskFull(
                f"the state disk is full and its reserve is spent: make room on the "
                f"filesystem of {path.parent} (the database is intact), then start again"
            ) from None
        log.error("the state disk is full: its reserve is spent on opening the database")
        return Store(path)


def highest_job_id_on_disk(*directories: Path) -> int:
    """The highest job id that names an entry of these directories (checkpoints, job
    state); 0 when none does."""
    highest = 0
    for directory in directories:
        with contextlib.suppress(FileNotFoundError), os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.isdigit():
                    highest = max(highest, int(entry.name))
    return highest


# Files of HOME and of each job directory that only the daemon's owner may read.
PRIVATE_FILES = (
    "podium.db",
    "podium.db-wal",
    "podium.db-shm",
    "podiumd.log",
    "health.jsonl",
    "cluster.yaml",
    "xid-offset.json",
)
JOB_PRIVATE_FILES = ("launch.json", "supervisor.log", "result.json", "started.json")


__all__ = [
    "JOB_PRIVATE_FILES",
    "PRIVATE_FILES",
    "close_job_files",
    "highest_job_id_on_disk",
    "make_private",
    "open_store",
    "take_instance_lock",
]
