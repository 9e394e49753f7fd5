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


def restart_count() -> int:
    """How many times this job has been restarted (0 on its first run)."""
    return int(os.environ.get("PODIUM_RESTART_COUNT", "0"))


__all__ = ["heartbeat", "restart_count"]
