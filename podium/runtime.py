"""Calls a job makes from its own code (no daemon involved; standard library only)."""

from __future__ import annotations

import os


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
    PODIUM_RANK_BEATS). Call it every step after the forward pass and before the
    collective: a rank that hangs is then named by its step, before the job-wide
    heartbeat fires (podium.run.rank_beats). Returns False outside such a job."""
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


def restart_count() -> int:
    """How many times this job has been restarted (0 on its first run)."""
    return int(os.environ.get("PODIUM_RESTART_COUNT", "0"))


__all__ = ["heartbeat", "rank_step", "restart_count"]
