"""Slurm host lists: "node[1-3,5],gpu07" is node1, node2, node3, node5 and gpu07.
Standard library only (`scontrol show hostnames` inside jobs uses it)."""

from __future__ import annotations

import re

MAX_HOSTS = 100_000  # the most names one expression may expand to


def hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list: "node[1-3,5],gpu07" -> [node1, node2, node3, node5, gpu07]."""
    names: list[str] = []  # (refuses more than MAX_HOSTS names: ValueError)
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", expr or ""):
        match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not match:
            names.append(part)
            continue
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            lo, _, hi = item.partition("-")
            if hi:
                width = len(lo)
                if int(hi) - int(lo) + len(names) >= MAX_HOSTS:
                    raise ValueError(f"the host list {expr!r} names more than {MAX_HOSTS} hosts")
                names += [f"{prefix}{i:0{width}d}{suffix}" for i in range(int(lo), int(hi) + 1)]
            else:
                names.append(f"{prefix}{lo}{suffix}")
    return names
