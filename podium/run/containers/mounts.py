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
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
MS_BIND, MS_REC, MS_PRIVATE, MS_SLAVE = 4096, 16384, 1 << 18, 1 << 19


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
    "MS_NODEV",
    "MS_NOSUID",
    "MS_PRIVATE",
    "MS_RDONLY",
    "MS_REC",
    "MS_REMOUNT",
    "MS_SLAVE",
    "PR_SET_DUMPABLE",
    "ContainerError",
    "libc_call",
    "mount",
    "point",
    "unshare",
    "write_proc",
]
