"""A user's own directories under a shared state directory, and files made in them,
checked so that nothing another user put there first is ever used.

A state directory shared by every user of a cluster (Slurm's `slurm.state_dir`) is
like /tmp: mode 1777, so each user's first job can make `STATE/user-NAME`. But then
any user can make `STATE/user-OTHER` first, with their own files in it, and wait for
OTHER's job to write checkpoints there or run a script from there. So every part a job
walks below the state directory is opened without following a link and checked on its
descriptor (`fstat`) after it is made or found: a directory, owned by the job's uid,
not writable by group or others. What fails is refused with `Squatted`, whose message
names the path, who owns it and the fix, in one line; nothing is used.

Once `STATE/user-NAME` is checked, only that user (and root) can change anything
below it, and in a sticky state directory nobody else can rename it away, so paths
below it may be used by name afterwards.

Standard library only: the job wrapper and the keepers import it on compute nodes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import stat
import time
from collections.abc import Sequence
from pathlib import Path

from podium.run.files import write_all

FIX = (
    "an administrator removes it, or makes STATE/user-NAME for each user beforehand "
    "(docs/slurm.md, 'The shared state directory')"
)


class Squatted(PermissionError):
    """A path a job would use is not the job's user's alone; the message says which,
    why, and what to do, in one line."""


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _check_base(fd: int, base: Path, uid: int) -> None:
    info = os.fstat(fd)
    shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if shared and (info.st_uid not in (uid, 0) or not info.st_mode & stat.S_ISVTX):
        raise Squatted(
            f"the state directory {base} is {_owner(info.st_uid)}'s with mode "
            f"{stat.S_IMODE(info.st_mode):04o}: a directory every user writes in needs "
            "root as its owner and the sticky bit (chmod 1777, as /tmp), or anyone can "
            "replace what another user's jobs keep there"
        )


def _check_part(fd: int, path: str, uid: int) -> None:
    info = os.fstat(fd)
    if info.st_uid != uid:
        raise Squatted(
            f"{path} is {_owner(info.st_uid)}'s, not {_owner(uid)}'s: someone made it "
            f"before this user's first job, so nothing is kept or run from it; {FIX}"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Squatted(
            f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):04o}): "
            f"nothing is kept or run from it until its owner runs chmod go-w {path}"
        )


def _open_part(parent: int, name: str, path: str, mode: int | None) -> int:
    if mode is not None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, mode, dir_fd=parent)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Squatted(
                f"{path} is a link or not a directory: nothing is kept or run from it; {FIX}"
            ) from None
        raise


def open_owned(base: Path, parts: Sequence[str], uid: int, mode: int | None = None) -> int:
    """A descriptor of the directory base/parts..., walked part by part without
    following a link, every part checked on its descriptor: a directory owned by `uid`,
    not writable by group or others. With `mode`, a missing part is made so; without,
    it is an error. `base` itself (followed, it is the administrator's) must be owned
    by `uid` or root, and sticky, when others may write in it. The caller closes the
    descriptor. Raises Squatted (one line: the path, why, the fix) or OSError."""
    if any(not p or "/" in p or p in (".", "..") for p in parts):
        raise Squatted(f"{'/'.join(parts)!r} is not a relative path of plain names")
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _check_base(fd, base, uid)
        path = base
        for part in parts:
            path = path / part
            inner = _open_part(fd, part, str(path), mode)
            os.close(fd)
            fd = inner
            _check_part(fd, str(path), uid)
    except BaseException:
        os.close(fd)
        raise
    return fd


def owned_dir(base: Path, parts: Sequence[str], uid: int | None = None, mode: int = 0o700) -> Path:
    """base/parts..., each part made with `mode` when missing and checked as
    `open_owned` checks it (owned by `uid`, default ours). Idempotent. Raises Squatted
    or OSError (a part cannot be made: a missing or read-only base)."""
    os.close(open_owned(base, parts, os.geteuid() if uid is None else uid, mode))
    return base.joinpath(*parts)


def reclaimed_dir(base: Path, name: str, mode: int = 0o755) -> Path:
    """base/name as our own directory (the root hook's in the shared state directory):
    made with `mode` when missing; when what stands there is not a directory of ours
    that only we may write in (a user made it first, or put a link or a file there),
    it is moved aside to NAME.squatted-UID-TIME, where its owner can see it, and made
    anew; never written in. Raises Squatted when it cannot be moved (we are not root
    and it is another user's in a sticky directory)."""
    path = base / name
    for _ in range(3):
        try:
            return owned_dir(base, (name,), mode=mode)
        except Squatted:
            info = os.lstat(path)
            aside = base / f"{name}.squatted-{info.st_uid}-{time.time():.0f}"
            try:
                os.rename(path, aside)
            except OSError as exc:
                raise Squatted(
                    f"{path} is {_owner(info.st_uid)}'s and cannot be moved aside "
                    f"({exc.strerror}); {FIX}"
                ) from None
    raise Squatted(f"{path} was taken again each time it was made; {FIX}")


def under(base: Path, path: Path) -> tuple[str, ...] | None:
    """`path`'s parts below `base` (both made absolute, not resolved), or None when
    `path` is not below it."""
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(base)).parts
    except ValueError:
        return None


def new_file_at(
    directory: int, name: str, data: bytes, mode: int = 0o600, uid: int | None = None
) -> None:
    """Write `data` as file `name` of the directory open at descriptor `directory`, a
    file made new for it (given to `uid` when set): written under a random temporary
    name (O_EXCL|O_NONBLOCK: never a file, FIFO or link already there, never waiting)
    and renamed over `name`, so whatever stood there (a FIFO, a hard link to another
    file, a link) is replaced, never opened. OSError when `name` is a directory."""
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=directory)
    try:
        try:
            if uid is not None:
                os.fchown(fd, uid, -1)
            write_all(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=directory)
        raise


def new_file(directory: Path, name: str, data: bytes, mode: int = 0o600) -> Path:
    """`new_file_at` by path: `directory` must be one nobody else can write in
    (owned_dir's). Returns the file's path."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        new_file_at(fd, name, data, mode)
    finally:
        os.close(fd)
    return directory / name


__all__ = [
    "FIX",
    "Squatted",
    "new_file",
    "new_file_at",
    "open_owned",
    "owned_dir",
    "reclaimed_dir",
    "under",
]
