"""`sinfo` inside jobs: its summary (nodes alike share a line), `-N` (a line per node),
`-l` for both, and `-o/--format` with the `%` fields of Slurm 22.05's sinfo that have
meaning here, printed as Slurm prints them (held to the real sinfo by
tests/integration/test_slurm_differential.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from podium.api.times import format_duration
from podium.slurm_commands.args import read_options

SINFO_FLAGS = {"-N": "node", "--Node": "node", "-h": "noheader", "--noheader": "noheader"}
SINFO_FLAGS |= {"-a": "all", "--all": "all", "-l": "long", "--long": "long"}
SINFO_FLAGS |= {"--noconvert": "noconvert", "-e": "exact", "--exact": "exact"}  # accepted
SINFO_VALUED = {"-o": "format", "--format": "format", "-p": "partition", "--partition": "partition"}
SINFO_VALUED |= {"-n": "nodes", "--nodes": "nodes", "-t": "states", "--states": "states"}
STATE_NAMES = {"drained": "drain", "draining": "drng", "allocated": "alloc", "mixed": "mix"}
SUMMARY = "%9P %.5a %.10l %.6D %.6t %N"  # sinfo 22.05's default
LONG_SUMMARY = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"  # sinfo -l (after a date)
BY_NODE = "%N %.6D %.9P %6t"  # sinfo -N's: %N as wide as the longest name
LONG_BY_NODE = "%N %.6D %.9P %.11T %4c %.8z %.6m %.8d %.6w %.8f %20E"  # sinfo -N -l
Line = Mapping[str, Any]  # a node as one partition lists it: its record and "partition"


def _gres(n: Line) -> str:
    """`gpu:TYPE:N` as gres.conf names a type, `gpu:N` for GPUs of no type of their own
    (Podium's declared default type "gpu" is none: `gpu:gpu:4` is not Slurm's)."""
    gpus, kind = n.get("gpus_total") or 0, n.get("gpu_type")
    if not gpus:
        return "(null)"
    return f"gpu:{kind}:{gpus}" if kind and kind != "gpu" else f"gpu:{gpus}"


def _limits(n: Line) -> Mapping[str, Any]:
    found: Mapping[str, Any] = (n.get("partition_limits") or {}).get(n["partition"], {})
    return found


def _starred(n: Line) -> str:
    """%P: the partition, starred when it is the default, as sinfo marks it."""
    return str(n["partition"]) + ("*" if _limits(n).get("default") else "")


def _timelimit(n: Line) -> str:
    """%l: the partition's time limit as sinfo prints it: `infinite`, else
    [days-]hours:minutes:seconds."""
    seconds = _limits(n).get("max_time_s")
    return "infinite" if seconds is None else format_duration(seconds)


def _cpus_aiot(n: Line) -> str:
    alloc, total = n["cpus_alloc"], n["cpus_total"]
    if _long_state(n) in ("drained", "down"):  # none idle: all counted as other
        return f"{alloc}/0/{total}/{total}"
    return f"{alloc}/{total - alloc}/0/{total}"


def _busy(n: Line) -> bool:
    """Whether a node counts as allocated (A in sinfo's A/I/O/T): any job on it."""
    return _long_state(n) in ("allocated", "mixed", "draining")


def _counts(n: Line, full: bool) -> str:
    """%A (allocated/idle) or %F (allocated/idle/other/total) node counts."""
    count = int(n["count"])
    state = _long_state(n)
    busy = count if _busy(n) else 0
    other = count if state in ("drained", "down") else 0
    idle = count - busy - other
    return f"{busy}/{idle}/{other}/{count}" if full else f"{busy}/{idle}"


def _long_state(n: Line) -> str:
    return str(n["state"])


def _short_state(n: Line) -> str:
    state = _long_state(n)
    return STATE_NAMES.get(state, state)[:5]


# letter -> (title, -, value): as squeue's FIELDS, for squeue's renderer
SINFO_FIELDS: dict[str, tuple[str, tuple[str, ...], Callable[[Line], Any]]] = {
    "P": ("PARTITION", (), _starred),
    "R": ("PARTITION", (), lambda n: n["partition"]),
    "a": ("AVAIL", (), lambda n: "up"),
    "l": ("TIMELIMIT", (), _timelimit),
    "p": ("PRIO_TIER", (), lambda n: _limits(n).get("priority_tier", 1)),
    "D": ("NODES", (), lambda n: n["count"]),
    "N": ("NODELIST", (), lambda n: n["names"]),
    "n": ("HOSTNAMES", (), lambda n: n["names"]),
    "t": ("STATE", (), _short_state),
    "T": ("STATE", (), _long_state),
    "c": ("CPUS", (), lambda n: n["cpus_total"]),
    "C": ("CPUS(A/I/O/T)", (), _cpus_aiot),
    "m": ("MEMORY", (), lambda n: n["mem_total_mb"]),
    "e": ("FREE_MEM", (), lambda n: n["mem_total_mb"] - n["mem_alloc_mb"]),
    "G": ("GRES", (), _gres),
    "f": ("AVAIL_FEATURES", (), lambda n: ",".join(n.get("features") or []) or "(null)"),
    "E": ("REASON", (), lambda n: n.get("reason") or "none"),
    "A": ("NODES(A/I)", (), lambda n: _counts(n, full=False)),
    "F": ("NODES(A/I/O/T)", (), lambda n: _counts(n, full=True)),
    "s": ("JOB_SIZE", (), lambda n: "1-infinite"),
    "r": ("ROOT", (), lambda n: "no"),
    "h": ("OVERSUBSCRIBE", (), lambda n: "NO"),
    "g": ("GROUPS", (), lambda n: "all"),
    "z": ("S:C:T", (), lambda n: f"{n['cpus_total']}:1:1"),
    "d": ("TMP_DISK", (), lambda n: 0),
    "w": ("WEIGHT", (), lambda n: 1),
}


# The node states sinfo -t takes (Slurm 22.05's long names, then its compact ones).
_LONG_STATES = (
    "unknown", "down", "idle", "allocated", "?", "mixed", "future", "drain", "drained",
    "draining", "no_respond", "reserved", "perfctrs", "cloud", "completing",
    "powering_down", "powered_down", "power_down", "powering_up", "fail", "maint",
    "reboot", "reboot^",
)  # fmt: skip
_COMPACT_STATES = (
    "unk", "alloc", "mix", "futr", "drng", "resv", "npc", "comp", "pow_dn", "pow_up",
    "maint", "boot", "inval", "plnd",
)  # fmt: skip


def _node_states(text: str) -> set[str]:
    """The node states `-t` names (any case; `all` is every state: no filter); one it
    does not know raises ValueError, with the states it takes."""
    states = {s.strip().lower() for s in text.split(",") if s.strip()}
    for state in states:
        if state not in _LONG_STATES and state not in _COMPACT_STATES and state != "all":
            raise ValueError(
                f'Bad state string: "{state}" (valid states: {",".join(_LONG_STATES)}, or all)'
            )
    return set() if "all" in states else states


def sinfo(args: list[str], fetch: Callable[[], list[dict[str, Any]]]) -> str:
    """sinfo's summary (or -N, one line per node; or -o FORMAT) of the nodes `fetch()`
    gives, asked for once the options are read (a bad option needs no daemon): nodes
    whose fields print alike share a line, as sinfo groups them. `-p`, `-n`, `-t`
    filter."""
    given, words = read_options(args, SINFO_VALUED, SINFO_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    opts = dict(given)
    nodes = fetch()
    by_node, long = "node" in opts, "long" in opts
    default = (
        (LONG_BY_NODE if long else BY_NODE) if by_node else (LONG_SUMMARY if long else SUMMARY)
    )
    fmt = opts.get("format") or os.environ.get("SINFO_FORMAT") or default
    if by_node and fmt == default:  # its own format's %N: as wide as the longest name
        widest = max((len(n["node"]) for n in nodes), default=8)
        fmt = fmt.replace("%N ", f"%{max(widest, 8)}N ")
    from podium.slurm_commands.squeue import render

    render([], fmt, False, SINFO_FIELDS)  # a bad format is refused first
    wanted = {k: set(v.split(",")) for k, v in opts.items() if k in ("partition", "nodes")}
    states = _node_states(opts.get("states", ""))
    lines: list[dict[str, Any]] = []
    for n in nodes:
        for part in n["partitions"] or ["main"]:
            if part not in wanted.get("partition", {part}) or n["node"] not in wanted.get(
                "nodes", {n["node"]}
            ):
                continue
            if states and not states & {_long_state(n), _short_state(n)}:
                continue
            lines.append(dict(n, partition=part))
    grouped: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for line in lines:  # one line per node with -N; else nodes alike share one
        key = render([dict(line, count=0, names="")], fmt, False, SINFO_FIELDS)
        key += line["node"] if "node" in opts else ""
        if key not in grouped:
            grouped[key] = dict(line, count=0, names=[])
            order.append(key)
        grouped[key]["count"] += 1
        grouped[key]["names"].append(line["node"])
    rows = [dict(grouped[k], names=",".join(grouped[k]["names"])) for k in order]
    if not by_node:  # a partition none of whose nodes is listed: 0 nodes, n/a (as sinfo)
        shown = {r["partition"] for r in rows}
        template = nodes[0] if nodes else {}
        for part in template.get("partition_limits") or {}:
            if part not in shown and part in wanted.get("partition", {part}):
                rows.append(dict(template, partition=part, count=0, names="", state="n/a"))
    text = render(rows, fmt, "noheader" not in opts, SINFO_FIELDS, frozenset())
    if long:
        import time

        return f"{time.asctime()}\n{text}"
    return text


__all__ = ["SINFO_FIELDS", "sinfo"]
