"""Times as records show them (stdlib only)."""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path

if TYPE_CHECKING:
    from podium.api.records import RunTimes


LATEST = 253402300799.0  # 9999-12-31T23:59:59Z: the last second ISO 8601 years can show


def iso(ts: float | None) -> str | None:
    """An epoch time as ISO 8601 in local time with its UTC offset, to the second
    ("2026-11-23T02:40:00+00:00"), as datetime's isoformat(timespec="seconds") would
    write it; None stays None, and so does any value no calendar shows (infinite, NaN,
    before 1970 or after 9999): total over floats. C calls only: listings format 30,000
    of these."""
    if ts is None or not 0.0 <= ts <= LATEST:  # False for NaN too
        return None
    local = time.localtime(ts)
    offset = local.tm_gmtoff
    sign = "+" if offset >= 0 else "-"
    offset = abs(offset)
    return (
        f"{time.strftime('%Y-%m-%dT%H:%M:%S', local)}"
        f"{sign}{offset // 3600:02d}:{offset % 3600 // 60:02d}"
    )


def run_times(
    submit: float | None,
    start: float | None,
    end: float | None,
    now: float,
    gpus: float,
    cpus: float,
) -> RunTimes:
    """A job record's time and usage block (podium.api.records.JobRecord), the same
    arithmetic for every backend: submit, start and end as ISO text and epochs, the
    seconds it has run (to `now` while running; 0 before it starts) and its GPU- and
    CPU-seconds at `gpus` and `cpus`."""
    elapsed = max(0.0, (end if end is not None else now) - start) if start is not None else 0.0
    return {
        "submit_time": iso(submit),
        "start_time": iso(start),
        "end_time": iso(end),
        "submit_epoch": submit,
        "start_epoch": start,
        "end_epoch": end,
        "elapsed_s": round(elapsed, 3),
        "gpu_seconds": round(elapsed * gpus, 3),
        "cpu_seconds": round(elapsed * cpus, 3),
    }


def format_duration(seconds: float | None) -> str:
    """Format seconds the way squeue does: [days-]hours:minutes:seconds."""
    if seconds is None or not seconds < 1e12:  # infinite or NaN (no 32,000-year limits)
        return "UNLIMITED"
    total = int(max(seconds, 0.0))
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"
