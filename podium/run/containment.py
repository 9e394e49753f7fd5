"""Keeping every process of a job in reach, so none survives the job.

Two mechanisms, used together:
- the supervisor is a child subreaper (PR_SET_CHILD_SUBREAPER): a process of the job
  whose parent dies, or that double-forks and starts its own session, is re-parented
  to the supervisor and stays its descendant;
- where cgroups can be made (root), each job gets its own groups (`podium.run.cgroups`):
  they hold every process, enforce the job's limits, and cgroup.kill (v2) ends all of
  it at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable

from podium.run.cgroups import JobCgroups, Limits, current_layout

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants. True on success."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except OSError:
        return False


class ContainmentError(Exception):
    """proctrack "cgroup" was asked for but no job cgroup can be made here."""


class JobContainment:
    """All processes of one job: the supervisor's descendants, plus its cgroups if any.

    `mode` is "auto" (cgroups where possible), "cgroup" (required: raises
    ContainmentError without one) or "subreaper" (descendant tracking only). `limits`
    are enforced by the cgroups where the controllers allow (see `podium.run.cgroups`);
    `v2_base` is the v2 group the daemon prepared for jobs (default: our own).
    """

    def __init__(
        self,
        job_id: int,
        mode: str = "auto",
        limits: Limits | None = None,
        v2_base: str | None = None,
    ) -> None:
        self.subreaper = become_subreaper()
        self.groups: JobCgroups | None = None
        if mode != "subreaper":
            # The supervisor's pid makes the name unique: several daemons (homes) on
            # one machine number their jobs alike.
            self.groups = JobCgroups(
                f"podium-job-{job_id}-{os.getpid()}", current_layout(), limits or Limits(), v2_base
            )
        if mode == "cgroup" and (self.groups is None or self.groups.v2 is None):
            raise ContainmentError("proctrack is cgroup but no writable cgroup v2 is available")

    @property
    def procs_files(self) -> list[str]:
        """The files a task writes "0" to, to join the job's cgroups (none: no cgroup)."""
        return self.groups.procs_files if self.groups else []

    def members(self) -> set[int]:
        """Pids of every live process of the job (never the supervisor itself)."""
        me = os.getpid()
        pids = descendants(me)
        if self.groups is not None:
            pids |= self.groups.pids()
        pids.discard(me)
        return {p for p in pids if _alive(p)}

    def signal_all(self, sig: int) -> int:
        """Send `sig` once to every process of the job; return how many were signalled.

        Whole process groups are signalled with one killpg each, so a shell and the
        command it waits for get the signal together: signalled one by one, the
        shell could see its child die of it and exit normally (128+15) before its
        own signal came. Members in the supervisor's own group get it one by one.
        """
        members = self.members()
        own = os.getpgrp()
        groups: dict[int, int] = {}
        alone: list[int] = []
        for pid in members:
            try:
                pgid = os.getpgid(pid)
            except ProcessLookupError:
                continue
            if pgid == own:
                alone.append(pid)
            else:
                groups[pgid] = groups.get(pgid, 0) + 1
        count = 0
        for pgid, size in groups.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
                count += size
        for pid in alone:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                count += 1
        return count

    def kill_all(self, reap: Callable[[], None] | None = None, timeout: float = 10.0) -> int:
        """SIGKILL every process of the job until none is left; return how many were killed.

        `reap` collects exited children (the supervisor's, so it keeps task statuses);
        without it, zombies re-parented to the supervisor are reaped and discarded.
        """
        killed: set[int] = set()
        deadline = time.monotonic() + timeout
        if self.groups is not None:
            killed |= self.members()
            self.groups.kill()
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

    def oom_kills(self) -> int:
        return self.groups.oom_kills() if self.groups else 0

    def release(self) -> None:
        """Remove the job's cgroups once they are empty."""
        if self.groups is None:
            return
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            self.groups.remove()
            if not any(p.exists() for p in self.groups.paths):
                return
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


def session_members(sid: int) -> set[int]:
    """Pids of the processes in session `sid` (from /proc/PID/stat)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if len(fields) > 3 and fields[3] == str(sid):
            found.add(int(entry))
    return found


def carrying(pids: set[int], name: str, value: str) -> set[int]:
    """Those of `pids` whose environment holds NAME=value (as they were started: a
    process's later changes to its own environment are not seen)."""
    mark = f"\0{name}={value}\0".encode()
    found = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if mark in b"\0" + fh.read():
                    found.add(pid)
        except OSError:
            continue
    return found


def stopped_by_signal(pid: int) -> bool:
    """True while `pid` or one of its descendants is stopped by a signal (SIGSTOP,
    SIGTSTP: state T in /proc/PID/stat); a debugger's stop (t) does not count."""
    return any(_state(each) == "T" for each in (pid, *descendants(pid)))


def process_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    return _alive(pid)


def kill_and_wait(pids: set[int], timeout: float = 2.0) -> None:
    """SIGKILL `pids` and wait, up to `timeout` seconds, until none of them is alive
    (gone, or a zombie: it holds nothing any more). A process with much memory takes
    a moment to exit after SIGKILL: what it used (a GPU) is not free before."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.005)


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    return _state(pid) not in (None, "Z")


def _state(pid: int) -> str | None:
    """`pid`'s state letter in /proc/PID/stat (R, S, D, T, Z...); None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 : stat.rindex(")") + 3]


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
