"""Directory checks as a user without a new process per submission: one long-lived
helper per identity (uid, gid, groups), started with that identity, answers each
submission's checks over a pipe and leaves after a minute without work.

The helper is a few lines of Python run by the system's interpreter with `-I -S` (no
site, no environment, no import of Podium: any user can run it, whatever the daemon's
own virtual environment allows), so the kernel answers as that user exactly as the
`/bin/sh` check of `podium.run.identity` does, with the same findings. Where no helper
can be started (no system Python, or it dies), the caller falls back to that check.

Thread-safe: one request at a time per helper; the daemon's request threads share
them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence

from podium.run.identity import Identity

IDLE_EXIT_S = 60.0  # a helper with no request for this long exits on its own
REPLY_TIMEOUT_S = 30.0

# The helper: one JSON list of "k:PATH" arguments per line in ("d", "w", "r", "o", "i" as
# podium.run.identity's _CHECK_SCRIPT), one reply per line out: "ok", or the finding,
# the path and what the path is, tab-separated. Exits on EOF or after IDLE_EXIT_S idle.
_HELPER = r"""
import json, os, select, stat, sys
IDLE = float(sys.argv[1])
def kind(p):
    m = os.stat(p).st_mode
    if stat.S_ISFIFO(m): return "FIFO"
    if stat.S_ISSOCK(m): return "socket"
    if stat.S_ISDIR(m): return "directory"
    return "device"
def exists(p): return os.path.exists(p)
def islink(p): return os.path.islink(p)
def ok(p, mode): return os.access(p, mode)
def file(k, p):
    if islink(p): return ("link", p, "")
    if not (os.path.isfile(p) or stat.S_ISCHR(os.stat(p).st_mode)): return ("notfile", p, kind(p))
    if k == "o" and not ok(p, os.W_OK): return ("unwritable", p, "")
    if k == "i" and not ok(p, os.R_OK): return ("unreadable", p, "")
    return None
def check(args):
    for arg in args:
        k, p = arg[0], arg[2:]
        if k == "r":
            if not exists(p): return ("absent", p, "")
            if not ok(p, os.R_OK): return ("unreadable", p, "")
            if not (os.path.isfile(p) or ok(p, os.X_OK)): return ("denied", p, "")
            continue
        if k == "i":
            if not (exists(p) or islink(p)): return ("absent", p, "")
            found = file("i", p)
            if found: return found
            continue
        if k == "o":
            if exists(p) or islink(p):
                found = file("o", p)
                if found: return found
                continue
            p = p.rsplit("/", 1)[0] or "/"
            k = "w"
        if not os.path.isdir(p): return ("missing", p, "")
        if not ok(p, os.X_OK): return ("denied", p, "")
        if k == "w" and not ok(p, os.W_OK): return ("readonly", p, "")
    return None
while True:
    if not select.select([sys.stdin], [], [], IDLE)[0]: break
    line = sys.stdin.readline()
    if not line: break
    try:
        found = check(json.loads(line))
    except (OSError, ValueError) as exc:
        found = ("error", "", str(exc).replace("\t", " ").replace("\n", " "))
    sys.stdout.write("ok\n" if found is None else "\t".join(found) + "\n")
    sys.stdout.flush()
"""


class HelperUnavailable(Exception):
    """No helper could answer: the caller checks another way."""


class _Helper:
    """One helper process and the lock that serialises its requests."""

    def __init__(self, who: Identity, python: str) -> None:
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [python, "-I", "-S", "-c", _HELPER, str(IDLE_EXIT_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
            **who.subprocess_kwargs(),
        )
        self.last = time.monotonic()

    def ask(self, args: Sequence[str]) -> tuple[str, str, str] | None:
        """The first finding for `args`, or None when all pass."""
        proc = self.proc
        if proc.stdin is None or proc.stdout is None:
            raise HelperUnavailable("no pipe")
        try:
            proc.stdin.write(json.dumps(list(args)) + "\n")
            proc.stdin.flush()
            reply = proc.stdout.readline()
        except (OSError, ValueError) as exc:
            raise HelperUnavailable(str(exc)) from None
        self.last = time.monotonic()
        if not reply:
            raise HelperUnavailable(f"the helper exited ({proc.poll()})")
        if reply == "ok\n":
            return None
        kind, _, rest = reply.rstrip("\n").partition("\t")
        path, _, what = rest.partition("\t")
        if kind == "error":
            raise HelperUnavailable(what)
        return kind, path, what

    def stop(self) -> None:
        """End the helper and close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class DirCheckers:
    """The helpers by identity. `ask` starts one when needed and restarts it once when
    it has exited (idle, or killed); `HelperUnavailable` when none can run."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python if python is not None else _system_python()
        self._helpers: dict[Identity, _Helper] = {}
        self._lock = threading.Lock()

    def ask(self, who: Identity, args: Sequence[str]) -> tuple[str, str, str] | None:
        """The first finding for `args` as `who` (kind, path, what), or None."""
        if not self.python:
            raise HelperUnavailable("no system Python for the check helper")
        key = Identity(who.uid, who.gid, tuple(sorted(who.groups)), 0)
        for attempt in (1, 2):
            helper = self._helper(key, who)
            with helper.lock:
                try:
                    return helper.ask(args)
                except HelperUnavailable:
                    with self._lock:
                        if self._helpers.get(key) is helper:
                            del self._helpers[key]
                    helper.stop()
                    if attempt == 2:
                        raise
        raise HelperUnavailable("unreachable")  # pragma: no cover

    def _helper(self, key: Identity, who: Identity) -> _Helper:
        with self._lock:
            self._reap()
            helper = self._helpers.get(key)
            if helper is None or helper.proc.poll() is not None:
                try:
                    helper = _Helper(who, self.python)
                except OSError as exc:
                    raise HelperUnavailable(str(exc)) from None
                self._helpers[key] = helper
            return helper

    def _reap(self) -> None:
        """Forget (and wait for) helpers that exited or are about to, idle."""
        now = time.monotonic()
        for key, helper in list(self._helpers.items()):
            idle = helper.proc.poll() is not None or now - helper.last > IDLE_EXIT_S - 5
            if idle and helper.lock.acquire(blocking=False):
                try:
                    helper.stop()
                finally:
                    helper.lock.release()
                del self._helpers[key]

    def close(self) -> None:
        """Stop every helper (the daemon's shutdown)."""
        with self._lock:
            for helper in self._helpers.values():
                helper.stop()
            self._helpers.clear()


def _system_python() -> str:
    """The system's Python 3 (not the daemon's virtual environment, which another user
    may not be allowed to run): /usr/bin/python3 where it exists."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3", path="/usr/bin:/bin") or ""


__all__ = ["DirCheckers", "HelperUnavailable"]
