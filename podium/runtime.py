"""Calls a job makes from its own code (no daemon involved; standard library only)."""

from __future__ import annotations

import json
import os
import time
from typing import Any


def heartbeat() -> bool:
    """Tell Podium this job is alive: touch PODIUM_HEARTBEAT_FILE. Call it at least once
    per heartbeat timeout (e.g. every training step). Returns False outside a job that
    declared a heartbeat."""
    path = os.environ.get("PODIUM_HEARTBEAT_FILE")
    if not path:
        return False
    try:
        os.utime(path)
    except FileNotFoundError:
        with open(path, "a"):
            pass
    return True


def rank_step(step: int) -> bool:
    """Tell Podium this rank reached training `step` (write it to the rank's file in
    PODIUM_RANK_BEATS). Call it every step once the step's computation is done and
    before the collective (under DDP, whose all-reduce starts inside backward(), from
    a communication hook as the last bucket launches: examples/ddp_marks.py): a rank
    that hangs is then named by its step, before the job-wide heartbeat fires
    (podium.run.rank_beats). Returns False outside such a job."""
    directory = os.environ.get("PODIUM_RANK_BEATS")
    rank = os.environ.get("RANK") or os.environ.get("PODIUM_PROCID") or "0"
    if not directory or not rank.isdigit():
        return False
    path = os.path.join(directory, rank)
    scratch = f"{path}.{os.getpid()}"
    with open(scratch, "w") as fh:
        fh.write(f"{int(step)}\n")
    os.replace(scratch, path)
    return True


def replace_ready() -> bool:
    """Tell Podium this job takes part in replacements (a job with --spares: write
    `ready` into PODIUM_REPLACE_FILE, once, before any replacement was told). Its
    survivors must then rejoin the rendezvous `replacement()` gives when a replica is
    replaced (docs/resiliency.md). Returns False outside such a job."""
    path = os.environ.get("PODIUM_REPLACE_FILE")
    if not path or os.environ.get("PODIUM_REPLACEMENT") == "1":
        return False
    with open(path, "r+") as fh:
        if not fh.read(1):  # nothing told yet: nothing to overwrite
            fh.write("ready\n")
    return True


def replacement(after: int = 0, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """The next replacement Podium tells the job of (generation > `after`): its
    generation, master_addr, master_port, world, replaced ranks, survivors and reason;
    None when none comes within `timeout_s` (or outside a job with spares)."""
    path = os.environ.get("PODIUM_REPLACE_FILE")
    deadline = time.monotonic() + timeout_s
    while path:
        try:
            with open(path) as fh:
                told = json.loads(fh.readline() or "null")
        except (OSError, ValueError):
            told = None
        if isinstance(told, dict) and int(told.get("generation", 0)) > after:
            return told
        if time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    return None


def restart_count() -> int:
    """How many times this job has been restarted (0 on its first run)."""
    return int(os.environ.get("PODIUM_RESTART_COUNT", "0"))


__all__ = ["heartbeat", "rank_step", "replace_ready", "replacement", "restart_count"]
