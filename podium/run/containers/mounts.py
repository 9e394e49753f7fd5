"""The system calls a container is made with (mount, unshare, prctl) through libc, and
mount points made inside an image. Each failure is a ContainerError with one line
saying what could not be done. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE = 4
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_PRIVATE, MS_SLAVE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 19, 1 << 21, 1 << 24
# statvfs's flag for each mount flag a user namespace locks on the mounts it inherits
LOCKED_FLAGS = (
    (os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
    (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME),
    (os.ST_RELATIME, MS_RELATIME),
)  # fmt: skip


class ContainerError(Exception):
    """The container cannot be made; the message says what is wrong and what would do."""


_libc: Any = None


def _lib() -> Any:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2); raises ContainerError naming what and where."""
    if _lib().mount(
        src and src.encode(), target.encode(), fstype and fstype.encode(),
        ctypes.c_ulong(flags), data.encode() if data else None,
    ) != 0:  # fmt: skip
        err = ctypes.get_errno()
        raise ContainerError(f"mount {src or fstype} on {target}: {os.strerror(err)}")


def kept_flags(where: str) -> int:
    """The flags of the mount at `where` that a remount must keep: nosuid, nodev,
    noexec and the atime mode (strictatime when it has none). In a user namespace the
    kernel locks these on every mount inherited from outside it (and so on a bind
    of one), and a remount that drops one fails with EPERM (mount(2), "Locked mount
    flags")."""
    try:
        have = os.statvfs(where).f_flag
    except OSError as exc:
        raise ContainerError(f"cannot read the mount flags of {where}: {exc.strerror}") from None
    flags = 0
    for st_flag, ms_flag in LOCKED_FLAGS:
        if have & st_flag:
            flags |= ms_flag
    if not have & (os.ST_NOATIME | os.ST_RELATIME):
        flags |= MS_STRICTATIME
    return flags


def remount_readonly(where: str, flags: int = 0) -> None:
    """Make the bind mount at `where` read-only (adding `flags`, e.g. MS_NOSUID),
    keeping what its source mount locks (kept_flags): a driver file under the NVIDIA
    container toolkit's read-only, nosuid, nodev mount stays so."""
    mount(None, where, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags | kept_flags(where))


def child_report(pid: int, read_end: int) -> str:
    """What child `pid` wrote on the pipe `read_end` until it closed it, once the child
    is reaped (a forked helper's one report: "ok..." or why not)."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode(errors="replace")


def libc_call(name: str, *args: int) -> None:
    """Call libc's `name` with integer arguments; raises ContainerError when it fails."""
    if getattr(_lib(), name)(*args) != 0:
        err = ctypes.get_errno()
        raise ContainerError(f"cannot make the container ({name}): {os.strerror(err)}")


def unshare(flags: int) -> None:
    """unshare(2) with `flags`."""
    libc_call("unshare", flags)


def write_proc(path: str, text: str) -> None:
    """Write `text` to a /proc file in one write (uid_map and its kin want one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def point(target: str, inside: str, is_dir: bool) -> str:
    """The mount point for `inside` under `target`, made when missing (a writable
    container can take it; a read-only one must already have it). A symlink is
    refused: it could name a host path."""
    path = target + inside
    if not os.path.lexists(path):
        try:
            if is_dir:
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        except OSError as exc:
            raise ContainerError(
                f"cannot make {inside} in the image for a mount ({exc.strerror}); "
                "use a writable container or an image that has it"
            ) from None
    if os.path.islink(path):
        raise ContainerError(f"{inside} is a symlink in the image; mount somewhere else")
    return path


__all__ = [
    "CLONE_NEWNS",
    "CLONE_NEWUSER",
    "MS_BIND",
    "MS_NOATIME",
    "MS_NODEV",
    "MS_NOEXEC",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SLAVE",
    "PR_SET_DUMPABLE",
    "ContainerError",
    "child_report",
    "kept_flags",
    "libc_call",
    "mount",
    "point",
    "remount_readonly",
    "unshare",
    "write_proc",
]
