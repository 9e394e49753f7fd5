"""Times as Slurm's commands write them (scontrol, sacct): stdlib only."""

from __future__ import annotations

import time


def slurm_time(epoch: float | None) -> str:
    """Slurm's timestamp form: local time, seconds, no zone ("Unknown" for none)."""
    if epoch is None:
        return "Unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def slurm_duration(seconds: float | None) -> str:
    """Slurm's [D-]HH:MM:SS ("UNLIMITED" for none)."""
    if seconds is None:
        return "UNLIMITED"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


__all__ = ["slurm_duration", "slurm_time"]
