"""Slurm's textual formats for durations, memory sizes and begin times.

Standard library only. Every parser raises ValueError with a message that shows the
accepted forms; callers turn it into a SpecError naming the directive.
"""

from __future__ import annotations

import datetime as dt
import re

UNLIMITED = {"unlimited", "infinite", "inf"}

_DURATION_FORMS = (
    "minutes, minutes:seconds, hours:minutes:seconds, days-hours, "
    "days-hours:minutes, days-hours:minutes:seconds or UNLIMITED"
)


# The largest time limit, begin offset and memory size Podium takes: beyond them a
# value is a mistake (or an attack on an int64 column), never a real request.
MAX_SECONDS = 2**31 - 1  # about 68 years
MAX_MEMORY_MB = 2**40  # 1 EiB


def parse_duration(text: str) -> int | None:
    """Parse a Slurm time limit into seconds; None means unlimited.

    Accepts the forms sbatch accepts for --time: "30" (minutes), "30:00"
    (minutes:seconds), "1:30:00", "2-0", "2-12:00", "2-12:00:00", "UNLIMITED".
    """
    raw = text.strip()
    if raw.lower() in UNLIMITED:
        return None
    days = 0
    rest = raw
    if "-" in raw:
        day_text, rest = raw.split("-", 1)
        if not day_text.isdigit():
            raise ValueError(f"invalid time {text!r}: expected {_DURATION_FORMS}")
        days = int(day_text)
        parts = rest.split(":")
        if not all(p.isdigit() for p in parts) or len(parts) > 3:
            raise ValueError(f"invalid time {text!r}: expected {_DURATION_FORMS}")
        nums = [int(p) for p in parts] + [0] * (3 - len(parts))
        hours, minutes, seconds = nums
    else:
        parts = rest.split(":")
        if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
            raise ValueError(f"invalid time {text!r}: expected {_DURATION_FORMS}")
        nums = [int(p) for p in parts]
        if len(nums) == 1:
            hours, minutes, seconds = 0, nums[0], 0
        elif len(nums) == 2:
            hours, minutes, seconds = 0, nums[0], nums[1]
        else:
            hours, minutes, seconds = nums
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(f"invalid time {text!r}: a time limit must be positive")
    if total > MAX_SECONDS:
        raise ValueError(f"invalid time {text!r}: at most {MAX_SECONDS} s; use UNLIMITED")
    return total


_MEM_RE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_MEM_FACTOR = {"K": 1 / 1024, "M": 1, "": 1, "G": 1024, "T": 1024 * 1024}


def parse_memory_mb(text: str, zero_ok: bool = False) -> int:
    """Parse a Slurm memory size ("500", "500M", "4G", "1T") into MiB.

    A bare number is MiB, as in sbatch. Zero is refused unless `zero_ok` (sbatch's
    --mem=0, "all the node's memory").
    """
    match = _MEM_RE.match(text.strip())
    if not match:
        raise ValueError(f"invalid memory size {text!r}: expected a number with K, M, G or T")
    value = int(match.group(1)) * _MEM_FACTOR[match.group(2).upper()]
    mb = int(value) if value >= 1 else (1 if value > 0 else 0)
    if mb == 0 and zero_ok and int(match.group(1)) == 0:
        return 0
    if mb <= 0:
        raise ValueError(f"invalid memory size {text!r}: must be at least 1M")
    if mb > MAX_MEMORY_MB:
        raise ValueError(f"invalid memory size {text!r}: at most {MAX_MEMORY_MB // 2**20}T")
    return mb


_RELATIVE_RE = re.compile(
    r"^now([+-])(\d+)(seconds?|sec|s|minutes?|min|m|hours?|h|days?|d|weeks?|w)?$", re.IGNORECASE
)  # Slurm's parse_time: now[+-]count[seconds|minutes|hours|days|weeks], singular or not
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_begin(text: str, now: float) -> float:
    """Parse a --begin time into an epoch timestamp, given `now`.

    Accepts "now", "now+N[seconds|minutes|hours|days|weeks]" (singular too; bare N is
    seconds, as in sbatch; now-N is in the past: at once), "HH:MM[:SS]" (today, or
    tomorrow if already past), and ISO dates "YYYY-MM-DD[THH:MM[:SS]]" in local time.
    """
    raw = text.strip()
    if raw.lower() == "now":
        return now
    match = _RELATIVE_RE.match(raw)
    if match:
        unit = (match.group(3) or "s")[0].lower()
        offset = int(match.group(2)) * _UNIT_SECONDS[unit]
        if offset > MAX_SECONDS:
            raise ValueError(f"invalid begin time {text!r}: at most {MAX_SECONDS} s from now")
        return now + offset if match.group(1) == "+" else now - offset
    if re.match(r"^\d{1,2}:\d{2}(:\d{2})?$", raw):
        parts = [int(p) for p in raw.split(":")] + [0]
        today = dt.datetime.fromtimestamp(now)
        moment = today.replace(hour=parts[0], minute=parts[1], second=parts[2], microsecond=0)
        if moment.timestamp() < now:
            moment += dt.timedelta(days=1)
        return moment.timestamp()
    try:
        return dt.datetime.fromisoformat(raw).timestamp()
    except (ValueError, OverflowError, OSError):
        raise ValueError(
            f"invalid begin time {text!r}: expected now, now+N[minutes|hours|days|weeks], "
            "HH:MM[:SS] or YYYY-MM-DD[THH:MM[:SS]]"
        ) from None
