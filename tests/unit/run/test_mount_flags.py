"""The flags a read-only remount keeps (podium.run.containers.mounts.kept_flags), read
from real mounts of this machine."""

from __future__ import annotations

import os

import pytest

from podium.run.containers.mounts import (
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_STRICTATIME,
    ContainerError,
    kept_flags,
)


def _mount_points() -> list[tuple[str, set[str]]]:
    """(mount point, its per-mount options) of this process's mounts, from mountinfo."""
    points = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            if os.path.isdir(fields[4]):
                points.append((fields[4], set(fields[5].split(","))))
    return points


def test_every_mount_keeps_the_flags_mountinfo_shows() -> None:
    """For each mount of this machine, nosuid, nodev and noexec are kept exactly when
    the mount has them."""
    checked = 0
    for point, options in _mount_points():
        try:
            flags = kept_flags(point)
        except ContainerError:
            continue  # a mount this process may not look at
        for name, bit in (("nosuid", MS_NOSUID), ("nodev", MS_NODEV), ("noexec", MS_NOEXEC)):
            assert bool(flags & bit) == (name in options), (point, name)
        checked += 1
    assert checked >= 1


def test_the_atime_mode_is_kept_as_statvfs_reports_it() -> None:
    have = os.statvfs("/").f_flag
    flags = kept_flags("/")
    if not have & (os.ST_NOATIME | os.ST_RELATIME):
        assert flags & MS_STRICTATIME
    else:
        assert not flags & MS_STRICTATIME


def test_a_missing_path_is_a_one_line_container_error() -> None:
    with pytest.raises(ContainerError, match="cannot read the mount flags of /nonexistent"):
        kept_flags("/nonexistent/x")
