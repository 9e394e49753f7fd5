"""Keeping every process of a job in reach, so none survives the job.

Two mechanisms, used together:
- the supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): a process of the job
  whose parent dies, or that double-forks and starts its own session, is re-parented
  to the supervisor and stays its descendant;
- where a writable cgroup v2 hierarchy exists (root, usually), each job gets its own
  cgroup, and cgroup.kill ends all of it at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants. True on success."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except OSError:
        return False


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mounts") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == "cgroup2":
                    return Path(parts[1])
    except OSError:
        return None
    return None


def _own_cgroup() -> str:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return "/"


class ContainmentError(Exception):
    """proctrack "cgroup" was asked for but no job cgroup can be made here."""


class JobContainment:
    """All processes of one job: the supervisor's descendants, plus its cgroup if any.

    `mode` is "auto" (cgroup where possible), "cgroup" (required: raises
    ContainmentError without one) or "subreaper" (descendant tracking only).
    """

    def __init__(self, job_id: int, mode: str = "auto") -> None:
        self.cgroup: Path | None = None
        self.subreaper = become_subreaper()
        if mode != "subreaper":
            self._make_cgroup(job_id)
        if mode == "cgroup" and self.cgroup is None:
            raise ContainmentError("proctrack is cgroup but no writable cgroup v2 is available")

    def _make_cgroup(self, job_id: int) -> None:
        mount = _cgroup2_mount()
        if mount is None or os.geteuid() != 0:
            return
        parent = mount / _own_cgroup().lstrip("/")
        # The supervisor's pid makes the name unique: several daemons (homes) on one
        # machine number their jobs alike.
        path = parent / f"podium-job-{job_id}-{os.getpid()}"
        try:
            path.mkdir()
        except OSError:
            return
        if os.access(path / "cgroup.procs", os.W_OK):
            self.cgroup = path
        else:
            self._remove(path)

    @property
    def procs_file(self) -> str | None:
        """The file a task writes "0" to, to join the job's cgroup (None: no cgroup)."""
        return str(self.cgroup / "cgroup.procs") if self.cgroup else None

    @staticmethod
    def _remove(path: Path) -> None:
        with contextlib.suppress(OSError):
            path.rmdir()

    def members(self) -> set[int]:
        """Pids of every live process of the job (never the supervisor itself)."""
        me = os.getpid()
        pids = descendants(me)
        if self.cgroup is not None:
            try:
                for line in (self.cgroup / "cgroup.procs").read_text().split():
                    pids.add(int(line))
            except OSError:
                pass
        pids.discard(me)
        return {p for p in pids if _alive(p)}

    def signal_all(self, sig: int) -> int:
        """Send `sig` to every process of the job; return how many were signalled."""
        count = 0
        for pid in self.members():
            try:
                os.kill(pid, sig)
                count += 1
            except ProcessLookupError:
                pass
        return count

    def kill_all(self, reap: Callable[[], None] | None = None, timeout: float = 10.0) -> int:
        """SIGKILL every process of the job until none is left; return how many were killed.

        `reap` collects exited children (the supervisor's, so it keeps task statuses);
        without it, zombies re-parented to the supervisor are reaped and discarded.
        """
        killed: set[int] = set()
        deadline = time.monotonic() + timeout
        if self.cgroup is not None and (self.cgroup / "cgroup.kill").exists():
            killed |= self.members()
            with contextlib.suppress(OSError):
                (self.cgroup / "cgroup.kill").write_text("1")
        while True:
            pids = self.members()
            if not pids:
                break
            killed |= pids
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            (reap or reap_children)()
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        return len(killed)

    def release(self) -> None:
        """Remove the job's cgroup once it is empty."""
        if self.cgroup is not None:
            deadline = time.monotonic() + 2.0
            while self.cgroup.exists() and time.monotonic() < deadline:
                try:
                    self.cgroup.rmdir()
                except OSError:
                    time.sleep(0.02)


def _children(pid: int) -> list[int] | None:
    """Direct children of `pid` from /proc/PID/task/*/children (None if unsupported)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found.extend(int(p) for p in fh.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread is gone
            return None  # kernel without CONFIG_PROC_CHILDREN
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> set[int]:
    """Every descendant of `pid`, walking the kernel's children lists (psutil if absent)."""
    out: set[int] = set()
    stack = [pid]
    while stack:
        kids = _children(stack.pop())
        if kids is None:
            import psutil

            try:
                return {c.pid for c in psutil.Process(pid).children(recursive=True)}
            except psutil.Error:
                return out
        for kid in kids:
            if kid not in out:
                out.add(kid)
                stack.append(kid)
    return out


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 : stat.rindex(")") + 3] != "Z"


def reap_children(record: Callable[[int, int], None] | None = None) -> None:
    """Collect every exited child (ours or re-parented to us); give `record` each
    (pid, wait status). Never blocks."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if record is not None:
            record(pid, status)
