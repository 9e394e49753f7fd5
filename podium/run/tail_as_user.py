"""The end of a job's output file, read with the job user's own identity: the kernel
decides what may be read, so a path that names another user's file (or a link to one)
yields only what that user could read alone. A dashboard's log tail goes through here,
never through the daemon's root `open()`."""

from __future__ import annotations

import subprocess

from podium.run.identity import Identity

# $1: the path. Only a regular file that is not a link is read (a FIFO or a device could
# block or never end); the answer is its size on the first line, then its last $2 bytes.
_TAIL_SCRIPT = r"""
[ -L "$1" ] && { echo link; exit 3; }
[ -e "$1" ] || { echo absent; exit 3; }
[ -f "$1" ] || { echo notfile; exit 3; }
[ -r "$1" ] || { echo unreadable; exit 3; }
wc -c < "$1" || exit 4
exec tail -c "$2" -- "$1"
"""

_WHY = {
    "link": "is a symbolic link (not followed)",
    "absent": "does not exist (yet), or its directory is closed to the job's user",
    "notfile": "is not a regular file",
    "unreadable": "is not readable by the job's user",
}


class TailError(Exception):
    """The file cannot be read as the user; the message says why, in one line."""


def tail_as_user(who: Identity, path: str, max_bytes: int) -> tuple[bytes, int]:
    """The last `max_bytes` bytes of `path` as `who` may read them, and the file's size
    in bytes. Raises TailError when the file is missing, a link, not a regular file or
    closed to `who`, or when reading takes more than 5 s."""
    if not path.startswith("/"):
        raise TailError(f"{path}: not an absolute path")
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", _TAIL_SCRIPT, "podium-tail", path, str(int(max_bytes))],
            capture_output=True,
            timeout=5,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            **who.subprocess_kwargs(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise TailError(f"{path}: cannot be read as uid {who.uid}: {exc}") from None
    first, _, rest = done.stdout.partition(b"\n")
    if done.returncode != 0:
        why = _WHY.get(first.decode("ascii", "replace").strip(), "cannot be read")
        raise TailError(f"{path} {why}")
    try:
        size = int(first.strip())
    except ValueError:
        raise TailError(f"{path} cannot be read") from None
    return rest, size


__all__ = ["TailError", "tail_as_user"]
