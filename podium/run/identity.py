"""Acting with exactly a user's identity: uid, gid, supplementary groups, umask.

Standard library only (the supervisor imports it at every job start).

- `Identity.of(uid, gid, user)` resolves the user's groups as initgroups(3) would.
- `Identity.entered()` switches this process's effective ids and groups to the user's
  for a block and back to root after; only for single-threaded processes (the
  supervisor), since set*id calls apply to every thread of a process.
- `Identity.subprocess_kwargs()` gives `subprocess` what it needs to start a command as
  the user (the switch happens in the child, so it is safe in the threaded daemon).
- `check_dirs_as_user()` answers "may this user enter (and write) these directories"
  by asking the kernel as that user, so a root daemon never reveals what lies in
  directories the user cannot read.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple, TypedDict

DEFAULT_UMASK = 0o022


class SubprocessIdentity(TypedDict, total=False):
    """The `subprocess` keyword arguments that start a child as a user."""

    user: int
    group: int
    extra_groups: list[int]
    umask: int


class Identity(NamedTuple):
    """A Unix user as a job runs: ids, supplementary groups, and the submit-time umask.
    (A NamedTuple, not a dataclass: the supervisor imports this at every job start.)"""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    umask: int = DEFAULT_UMASK

    @classmethod
    def of(cls, uid: int, gid: int, user: str, umask: int = DEFAULT_UMASK) -> Identity:
        """The identity of `user`, with the groups initgroups(3) would give it; only
        `gid` when the user is unknown to the system."""
        try:
            groups = tuple(os.getgrouplist(user, gid))
        except (KeyError, OSError):
            groups = (gid,)
        return cls(uid, gid, groups, umask)

    @property
    def is_switch_needed(self) -> bool:
        """True when this process must change identity to act as the user."""
        return os.geteuid() == 0 and self.uid != 0

    @contextmanager
    def entered(self) -> Iterator[None]:
        """Within the block, files are opened and paths resolved as the user (effective
        uid, gid, groups and umask). A no-op unless this process runs as root.

        Only for single-threaded processes: the switch is process-wide.
        """
        old_umask = os.umask(self.umask)
        if not self.is_switch_needed:
            try:
                yield
            finally:
                os.umask(old_umask)
            return
        old_groups = os.getgroups()
        os.setgroups(list(self.groups))
        os.setegid(self.gid)
        os.seteuid(self.uid)
        try:
            yield
        finally:
            os.seteuid(0)
            os.setegid(0)
            os.setgroups(old_groups)
            os.umask(old_umask)

    def subprocess_kwargs(self) -> SubprocessIdentity:
        """Keyword arguments for `subprocess.run/Popen` that start the child as the user
        (empty when this process is not root or already is the user)."""
        if not self.is_switch_needed:
            return {"umask": self.umask}
        return {
            "user": self.uid,
            "group": self.gid,
            "extra_groups": list(self.groups),
            "umask": self.umask,
        }


# Each argument is "d:PATH" (must be an enterable directory), "w:PATH" (and writable),
# "r:PATH" (a readable file, or a readable and enterable directory), "o:PATH" (a job's
# output file: if it exists, a writable regular file or character device, never a link;
# else in a writable directory) or "i:PATH" (a job's input file: a readable regular file
# or character device, never a link).
# `[ -d "$p" ]` has two arguments after `[`, so `p` is always an operand, never an option.
_CHECK_SCRIPT = r"""
kind() {
  if [ -p "$1" ]; then echo FIFO; elif [ -S "$1" ]; then echo socket
  elif [ -d "$1" ]; then echo directory; else echo device; fi
}
file() {  # $1: o or i, $2: the path, which exists
  [ -L "$2" ] && { printf 'link\n%s\n' "$2"; exit 1; }
  [ -f "$2" ] || [ -c "$2" ] || { printf 'notfile\n%s\n%s\n' "$2" "$(kind "$2")"; exit 1; }
  case $1 in
    o) [ -w "$2" ] || { printf 'unwritable\n%s\n' "$2"; exit 1; };;
    i) [ -r "$2" ] || { printf 'unreadable\n%s\n' "$2"; exit 1; };;
  esac
}
for arg; do
  p=${arg#?:}
  case $arg in
    r:*)
      [ -e "$p" ] || { printf 'absent\n%s\n' "$p"; exit 1; }
      [ -r "$p" ] || { printf 'unreadable\n%s\n' "$p"; exit 1; }
      [ -f "$p" ] || [ -x "$p" ] || { printf 'denied\n%s\n' "$p"; exit 1; }
      continue;;
    i:*)
      [ -e "$p" ] || [ -L "$p" ] || { printf 'absent\n%s\n' "$p"; exit 1; }
      file i "$p"; continue;;
    o:*)
      if [ -e "$p" ] || [ -L "$p" ]; then file o "$p"; continue; fi
      p=${p%/*}; [ -n "$p" ] || p=/
      arg=w:$p;;
  esac
  [ -d "$p" ] || { printf 'missing\n%s\n' "$p"; exit 1; }
  [ -x "$p" ] || { printf 'denied\n%s\n' "$p"; exit 1; }
  case $arg in w:*) [ -w "$p" ] || { printf 'readonly\n%s\n' "$p"; exit 1; };; esac
done
"""
ALWAYS_USABLE = frozenset({"/dev/null"})  # needs no look: anyone may read and write it


JOB_FILES = "a job's input and output must be regular files, a terminal or /dev/null"


class DirCheckError(Exception):
    """A directory the job needs is missing or closed to its user; the message says which."""


def check_dirs_as_user(
    who: Identity,
    enter: Sequence[str] = (),
    write: Sequence[str] = (),
    read: Sequence[str] = (),
    outputs: Sequence[str] = (),
    inputs: Sequence[str] = (),
    ask: Callable[[Identity, Sequence[str]], tuple[str, str, str] | None] | None = None,
) -> None:
    """Raise DirCheckError unless `who` may enter every directory in `enter`, enter
    and write every one in `write`, read every file (or read and enter every
    directory) in `read`, write every job output file in `outputs` (an existing
    regular file or character device, else a new file in a writable directory) and
    read every job input file in `inputs` (a regular file or character device); job
    files are never symbolic links, as the job opens them. The kernel answers as that
    user (a short /bin/sh started with the user's ids), so the answer is what the user
    could learn alone. /dev/null is always fine and never looked at. With `ask` (a
    long-lived helper already running as the user: `podium.run.dircheck_helper`), the
    same checks are asked of it instead, and the shell runs only when `ask` raises.
    """
    args = [f"d:{p}" for p in enter] + [f"w:{p}" for p in write] + [f"r:{p}" for p in read]
    args += [f"o:{p}" for p in outputs if p not in ALWAYS_USABLE]
    args += [f"i:{p}" for p in inputs if p not in ALWAYS_USABLE]
    if not args:
        return
    if ask is not None:
        try:
            found = ask(who, args)
        except Exception:  # the helper is gone or cannot run: ask the shell instead
            found = ("", "", "")
        if found is None:
            return
        if found[0] in _FINDINGS:
            kind, path, what = found
            raise DirCheckError(_FINDINGS[kind].format(path=path, what=what, job_files=JOB_FILES))
    import subprocess  # here, not at the top: the supervisor imports this module

    try:
        done = subprocess.run(
            ["/bin/sh", "-c", _CHECK_SCRIPT, "podium-check", *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            **who.subprocess_kwargs(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise DirCheckError(f"cannot check directories as uid {who.uid}: {exc}") from None
    if done.returncode == 0:
        return
    kind, _, rest = done.stdout.partition("\n")
    path, _, what = rest.rstrip("\n").partition("\n")
    message = _FINDINGS.get(kind)
    if message is None:
        raise DirCheckError(f"cannot check directories as uid {who.uid}: {done.stderr.strip()}")
    raise DirCheckError(message.format(path=path, what=what, job_files=JOB_FILES))


# What each finding of _CHECK_SCRIPT tells the user ({what}: a FIFO, a socket, ...).
_FINDINGS = {
    "missing": "{path} is not a directory you can see",
    "denied": "{path}: permission denied (you cannot enter it)",
    "readonly": "{path} is not writable by you",
    "absent": "{path} does not exist (or is hidden from you)",
    "unreadable": "{path}: permission denied (you cannot read it)",
    "unwritable": "{path}: permission denied (you cannot write it)",
    "link": "{path} is a symbolic link: name the file itself",
    "notfile": "{path} is a {what}: {job_files}",
}


__all__ = ["DEFAULT_UMASK", "JOB_FILES", "DirCheckError", "Identity", "check_dirs_as_user"]
