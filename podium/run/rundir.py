"""Where running jobs' state lives: the jobs directory, on a tmpfs where it can be.

A job's directory (its plan, script, lock, started/result files, step records) is
runtime state, like slurmd's spool: it matters while the job runs and until the
daemon has recorded its end, and nothing in it needs to outlive the machine. On a
tmpfs each of its files costs microseconds to make; on a disk, a file system
allocates and later frees an inode per file (on ext4 without a journal, about 1 ms
each when many were deleted lately). So the daemon keeps it on a tmpfs when it runs
as root (`/run/podium` where /run is a tmpfs, else `/dev/shm/podium-0`), and in
HOME/jobs otherwise: a user's /dev/shm files and /run/user directory are removed
when the user's last login session ends (systemd's RemoveIPC), jobs or not.

`HOME/jobs` is always the way in: a symbolic link to the directory chosen (or the
directory itself, on the state disk), so tools and people find a job's directory
at HOME/jobs/ID wherever it is. A link whose target is gone means the machine
restarted (a tmpfs starts empty): the runs that were going on are lost with it, and
`JobsDir.lost_runs` says so, so that the daemon records them as failed rather than
launching them again as if they had never started.

Standard library only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("podium.rundir")

LINK_NAME = "jobs"
TMPFS_TYPES = frozenset({"tmpfs", "ramfs"})


@dataclass(frozen=True)
class JobsDir:
    """The jobs directory a daemon uses (`path`, the real one), and whether the runs
    of an earlier boot were lost with it (`lost_runs`: their state cannot be read)."""

    path: Path
    lost_runs: bool
    on_tmpfs: bool


def mount_type(path: str, mounts: str = "/proc/self/mounts") -> str | None:
    """The file system type of the mount holding `path` (its longest mount point
    prefix), or None when /proc cannot tell."""
    try:
        with open(mounts) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    target = os.path.realpath(path)
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


def tmpfs_base(euid: int) -> Path | None:
    """The tmpfs directory for a root daemon's job state, or None (not root, or no
    tmpfs): /run/podium when /run is a tmpfs, else /dev/shm/podium-0."""
    if euid != 0:
        return None
    if mount_type("/run") in TMPFS_TYPES:
        return Path("/run/podium")
    if os.path.isdir("/dev/shm") and mount_type("/dev/shm") in TMPFS_TYPES:
        return Path(f"/dev/shm/podium-{euid}")
    return None


def _is_ours(path: Path) -> bool:
    """Whether `path` is a real directory (not a link) owned by us."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()


def _own_dir(path: Path, mode: int) -> bool:
    """Make `path` ours with `mode`, or check that it is ours and give it `mode`.
    False when it is not a directory of ours (someone else's, made first in a
    world-writable parent like /dev/shm): it must not be used."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, mode)
    if not _is_ours(path):
        return False
    if stat.S_IMODE(os.lstat(path).st_mode) != mode:
        os.chmod(path, mode)
    return True


def instance_name(home: Path) -> str:
    """A name for this HOME's directory under a shared base (several daemons, each
    with its own HOME, may run on one machine)."""
    return hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:16]


def choose(home: Path, setting: str) -> Path:
    """Where a new jobs directory goes for `setting` (auto, home, or an absolute path)."""
    if setting == "home":
        return home / LINK_NAME
    if setting != "auto":
        return Path(setting) / instance_name(home)
    base = tmpfs_base(os.geteuid())
    if base is None:
        return home / LINK_NAME
    if _own_dir(base, 0o711):
        return base / instance_name(home)
    log.warning("%s is not the daemon's own directory: job state stays on disk", base)
    return home / LINK_NAME


def open_jobs_dir(home: Path, setting: str, runs_recorded: bool) -> JobsDir:
    """The jobs directory for the daemon of `home`, made if needed, HOME/jobs leading
    to it. `runs_recorded`: whether the store holds running jobs (their state, where
    it still is, stays where it is until they end).

    Contract: an existing directory that still holds state (a link's live target, or
    HOME/jobs on disk while runs are recorded) is kept, whatever `setting` now says;
    otherwise the directory `setting` chooses is used. `lost_runs` is True only when
    HOME/jobs led to a directory that is gone (a restarted machine's tmpfs) while
    runs are recorded.
    """
    link = home / LINK_NAME
    lost = False
    if link.is_symlink():
        target = Path(os.readlink(link))
        if _is_ours(target.parent) and _is_ours(target):
            return JobsDir(target, False, mount_type(str(target)) in TMPFS_TYPES)
        lost = runs_recorded
        link.unlink()
    elif link.is_dir():
        if runs_recorded or choose(home, setting) == link:
            return JobsDir(link, False, mount_type(str(link)) in TMPFS_TYPES)
        shutil.rmtree(link)  # ended runs' directories of an older version: all recorded
    path = choose(home, setting)
    if path != link:
        path.parent.mkdir(parents=True, exist_ok=True)
        if _is_ours(path):
            shutil.rmtree(path)  # an earlier daemon's of this HOME, not linked: stale
        if not _own_dir(path, 0o711):
            raise OSError(f"{path} is not a directory of the daemon's own")
        with contextlib.suppress(OSError):
            (path / "home").write_text(f"{home.resolve()}\n")  # for people looking in
        os.symlink(path, link)
    elif not _own_dir(link, 0o711):
        raise OSError(f"{link} is not a directory of the daemon's own")
    if lost:
        log.warning("job state at %s was lost (the machine restarted): running jobs failed", link)
    return JobsDir(path, lost, mount_type(str(path)) in TMPFS_TYPES)


def close_jobs_dir(home: Path, jobs: Path) -> None:
    """At a clean stop: remove a jobs directory that holds no job (and the link to
    it), so nothing of this daemon stays in a shared tmpfs. Kept while a job's
    directory is there (its supervisor may still run)."""
    with os.scandir(jobs) as entries:
        if any(entry.name.isdigit() for entry in entries):
            return
    link = home / LINK_NAME
    if link.is_symlink() and Path(os.readlink(link)) == jobs:
        shutil.rmtree(jobs, ignore_errors=True)
        link.unlink()


__all__ = ["JobsDir", "close_jobs_dir", "mount_type", "open_jobs_dir", "tmpfs_base"]
