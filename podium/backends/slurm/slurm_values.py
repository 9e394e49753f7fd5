"""The values inside Slurm's machine-readable output, as every Slurm version writes
them (22.05's plain numbers and strings; v0.0.39+'s {"set", "infinite", "number"},
state lists and exit-code objects). Pure; a value a version lacks reads as None.
"""

from __future__ import annotations

import re
from typing import Any


def number(value: Any) -> int | None:
    """A Slurm number: a plain int, or v0.0.39+'s {"set", "infinite", "number"}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    return None


def states(value: Any) -> list[str]:
    """A state field as a list of upper-case words ("RUNNING" or ["RUNNING", ...])."""
    if isinstance(value, str):
        return [w for w in re.split(r"[+, ]", value.upper()) if w]
    if isinstance(value, list):
        return [str(w).upper() for w in value]
    return []


def exit_status(value: Any) -> tuple[int | None, int | None]:
    """(exit code, signal) from a raw wait status (22.05) or an exit-code object."""
    if isinstance(value, dict):
        code = number(value.get("return_code"))
        sig = value.get("signal") or {}
        signum = number(sig.get("id") if isinstance(sig, dict) else sig)
        return code, signum or None
    raw = number(value)
    if raw is None:
        return None, None
    if raw & 0x7F:
        return None, raw & 0x7F
    return raw >> 8, None


def memory_mb(text: str) -> int | None:
    """The mem= value of a TRES string ("cpu=2,mem=512M,node=1") in MiB."""
    match = re.search(r"(?:^|,)mem=(\d+(?:\.\d+)?)([KMGT]?)", text or "")
    if not match:
        return None
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}[match.group(2)]
    return int(float(match.group(1)) * scale)


def gres_count(text: str, name: str = "gpu") -> tuple[str | None, int]:
    """(type, count) of `name` in a GRES string: "gres:gpu:a100:2", "gpu:4,mps:400"."""
    for item in (text or "").split(","):
        fields = item.split("(")[0].replace("gres/", "gres:", 1).split(":")
        if fields and fields[0] == "gres":
            fields = fields[1:]
        if not fields or fields[0] != name:
            continue
        if len(fields) == 2 and fields[1].isdigit():
            return None, int(fields[1])
        if len(fields) == 3 and fields[2].isdigit():
            return fields[1], int(fields[2])
        if len(fields) == 1:
            return None, 1
    return None, 0


def gpu_indices(detail: str) -> list[int]:
    """GPU indices of one node's gres_detail entry: "gpu:a100:2(IDX:0,2-3)" -> [0, 2, 3]."""
    match = re.search(r"IDX:([0-9,\-]+)", detail or "")
    if not match:
        return []
    out: list[int] = []
    for item in match.group(1).split(","):
        lo, _, hi = item.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def wckey(value: Any) -> str | None:
    """squeue gives the wckey as text, sacct as {"wckey": text, "flags": [...]}."""
    if isinstance(value, dict):
        value = value.get("wckey")
    return text(value)


def text(value: Any) -> str | None:
    """A text field, None for Slurm's ways of writing nothing."""
    if value in (None, "", "(null)", "None"):
        return None
    return str(value)


__all__ = [
    "exit_status",
    "gpu_indices",
    "gres_count",
    "memory_mb",
    "number",
    "states",
    "text",
    "wckey",
]
