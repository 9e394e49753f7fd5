"""Times as Slurm's commands write them (squeue, sacct, scontrol): stdlib only.

Timestamps follow $SLURM_TIME_FORMAT as Slurm's do: unset or `standard`, ISO 8601 to
the second in local time; any other value is a strftime(3) format (`%m/%d %H:%M`).
`relative` (Slurm's "Tomorr 12:00" forms) is printed as `standard`."""

from __future__ import annotations

import os
import time

ISO = "%Y-%m-%dT%H:%M:%S"


def _format() -> str:
    chosen = os.environ.get("SLURM_TIME_FORMAT", "").strip()
    return ISO if chosen in ("", "standard", "relative") else chosen


def slurm_time(epoch: float | None) -> str:
    """Slurm's timestamp form: local time, seconds, no zone ("Unknown" for none)."""
    if epoch is None:
        return "Unknown"
    return time.strftime(_format(), time.localtime(epoch))


def slurm_stamp(iso: str | None, missing: str = "Unknown") -> str:
    """A record's ISO time ("2026-11-23T02:40:00+00:00", local) as Slurm prints it;
    `missing` for none."""
    if not iso:
        return missing
    shape = _format()
    if shape == ISO:
        return iso[:19]
    return time.strftime(shape, time.strptime(iso[:19], ISO))


def slurm_duration(seconds: float | None) -> str:
    """Slurm's [D-]HH:MM:SS ("UNLIMITED" for none)."""
    if seconds is None:
        return "UNLIMITED"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    clock = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


__all__ = ["slurm_duration", "slurm_stamp", "slurm_time"]
