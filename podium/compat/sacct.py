"""`sacct` and `sinfo` over Podium's records, in Slurm's default layouts.

sacct: each job, then its steps (ID.batch, ID.0, ...), with the default columns
`JobID JobName Partition Account AllocCPUS State ExitCode`. Options: `-j/--jobs`,
`-u/--user`, `-s/--state`, `-X/--allocations` (no steps), `-n/--noheader`,
`-P/--parsable2` (`|` between fields, no padding), `-p/--parsable` (a `|` after each),
`-o/--format` with the fields in FIELDS (`Name%20` widths too), `-a/--allusers`
(accepted: every user's jobs are listed unless -u).

sinfo: one line per partition and node state, `PARTITION AVAIL TIMELIMIT NODES STATE
NODELIST`; `-N/--Node` one line per node; `-h/--noheader`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podium.api.times import format_duration
from podium.compat.args import job_ids, read_options

SACCT_VALUED = {"-j": "jobs", "--jobs": "jobs", "-u": "user", "--user": "user"}
SACCT_VALUED |= {"-s": "state", "--state": "state", "-o": "format", "--format": "format"}
SACCT_VALUED |= {"-S": "starttime", "--starttime": "starttime", "-E": "endtime"}
SACCT_VALUED |= {"--endtime": "endtime"}  # accepted: Podium keeps every job it ran
SACCT_FLAGS = {"-X": "allocations", "--allocations": "allocations", "-n": "noheader"}
SACCT_FLAGS |= {"--noheader": "noheader", "-P": "parsable2", "--parsable2": "parsable2"}
SACCT_FLAGS |= {"-p": "parsable", "--parsable": "parsable", "-a": "all", "--allusers": "all"}
DEFAULT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
Row = Mapping[str, Any]


def _exit(r: Row) -> str:
    return f"{r.get('exit_code') or 0}:{r.get('signal') or 0}"


# field (lower case) -> (header, width, value of a job row, value of a step row)
FIELDS: dict[str, tuple[str, int, Callable[[Row], Any], Callable[[Row, Row], Any]]] = {
    "jobid": ("JobID", 12, lambda j: j["display_id"], lambda j, s: s["display_id"]),
    "jobidraw": (
        "JobIDRaw",
        12,
        lambda j: j["job_id"],
        lambda j, s: f"{j['job_id']}.{s['step_id']}",
    ),
    "jobname": ("JobName", 10, lambda j: j["name"], lambda j, s: s["name"]),
    "partition": ("Partition", 10, lambda j: j["partition"], lambda j, s: ""),
    "account": ("Account", 10, lambda j: j["account"], lambda j, s: j["account"]),
    "user": ("User", 9, lambda j: j["user"], lambda j, s: ""),
    "alloccpus": ("AllocCPUS", 10, lambda j: j["cpus"], lambda j, s: j["cpus"]),
    "state": ("State", 10, lambda j: j["state"], lambda j, s: s["state"]),
    "exitcode": ("ExitCode", 8, _exit, lambda j, s: _exit(s)),
    "elapsed": (
        "Elapsed",
        10,
        lambda j: format_duration(j["elapsed_s"]),
        lambda j, s: format_duration(s["elapsed_s"]),
    ),
    "start": (
        "Start",
        19,
        lambda j: (j["start_time"] or "Unknown")[:19],
        lambda j, s: (s["start_time"] or "Unknown")[:19],
    ),
    "end": (
        "End",
        19,
        lambda j: (j["end_time"] or "Unknown")[:19],
        lambda j, s: (s["end_time"] or "Unknown")[:19],
    ),
    "ntasks": ("NTasks", 8, lambda j: "", lambda j, s: s["ntasks"]),
    "nnodes": ("NNodes", 8, lambda j: j["node_count"], lambda j, s: 1),
    "nodelist": (
        "NodeList",
        15,
        lambda j: j.get("node") or "None assigned",
        lambda j, s: s["node"],
    ),
    "alloctres": (
        "AllocTRES",
        30,
        lambda j: _tres(j["cpus"], j["gpus"], j.get("gpu_type")),
        lambda j, s: _tres(j["cpus"], len(s["gpu_ids"])),
    ),
    "wckey": ("WCKey", 10, lambda j: j.get("wckey") or "", lambda j, s: ""),
    "restarts": ("Restarts", 8, lambda j: j["restart_count"], lambda j, s: ""),
    "timelimit": (
        "Timelimit",
        10,
        lambda j: format_duration(j.get("time_limit_s")),
        lambda j, s: "",
    ),
    "workdir": ("WorkDir", 20, lambda j: j["work_dir"], lambda j, s: ""),
}


def _raw_step(job: Row, step: Row) -> str:
    return f"{job['job_id']}.{step['step_id']}"


def _tres(cpus: int, gpus: int, kind: str | None = None) -> str:
    """AllocTRES as Slurm writes it: gres/gpu=N, with gres/gpu:TYPE=N for a typed
    request (a MIG profile), or gres/mps=N, gres/shard=N for shares of a GPU."""
    if not gpus:
        return f"cpu={cpus}"
    if kind in ("mps", "shard"):
        return f"cpu={cpus},gres/{kind}={gpus}"
    typed = f",gres/gpu:{kind}={gpus}" if kind else ""
    return f"cpu={cpus},gres/gpu={gpus}{typed}"


def sacct(args: list[str], acct: Callable[[], list[dict[str, Any]]]) -> str:
    """sacct's output for `args`, from `acct()` (job records, each with its steps)."""
    given, words = read_options(args, SACCT_VALUED, SACCT_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r} (job ids go with -j)")
    opts = dict(given)
    columns = [_column(name) for name in (opts.get("format") or DEFAULT).split(",") if name]
    jobs = acct()
    if "jobs" in opts:
        wanted = set(job_ids(opts["jobs"]))
        jobs = [j for j in jobs if j["job_id"] in wanted or j.get("array_job_id") in wanted]
    if "user" in opts:
        users = set(opts["user"].split(","))
        jobs = [j for j in jobs if j["user"] in users]
    if "state" in opts:
        states = {s.strip().upper() for s in opts["state"].split(",")}
        jobs = [j for j in jobs if j["state"] in states]
    rows: list[list[str]] = []
    for job in jobs:
        rows.append([str(get(job)) for _, _, get, _ in columns])
        if "allocations" not in opts:
            for step in job.get("steps", []):
                rows.append([str(get(job, step)) for _, _, _, get in columns])
    return _table(columns, rows, "noheader" not in opts, opts)


def _column(spec: str) -> tuple[str, int, Callable[[Row], Any], Callable[[Row, Row], Any]]:
    name, _, width = spec.strip().partition("%")
    if name.lower() not in FIELDS:
        known = ", ".join(h for h, *_ in FIELDS.values())
        raise ValueError(f"invalid field {name!r}: known fields are {known}")
    header, default, of_job, of_step = FIELDS[name.lower()]
    return header, int(width) if width.isdigit() else default, of_job, of_step


def _table(
    columns: Sequence[tuple[str, int, Any, Any]],
    rows: list[list[str]],
    header: bool,
    opts: Mapping[str, str],
) -> str:
    if "parsable2" in opts or "parsable" in opts:
        end = "|" if "parsable" in opts else ""
        lines = ["|".join(c[0] for c in columns) + end] if header else []
        lines += ["|".join(r) + end for r in rows]
        return "\n".join(lines)
    lines = []
    if header:
        lines.append(" ".join(f"{c[0]:>{c[1]}}"[-c[1] :] for c in columns))
        lines.append(" ".join("-" * c[1] for c in columns))
    for r in rows:
        lines.append(" ".join(f"{v[: c[1]]:>{c[1]}}" for v, c in zip(r, columns, strict=True)))
    return "\n".join(lines)


SINFO_FLAGS = {"-N": "node", "--Node": "node", "-h": "noheader", "--noheader": "noheader"}
SINFO_FLAGS |= {"-a": "all", "--all": "all", "-l": "long", "--long": "long"}
STATE_NAMES = {"drained": "drain", "draining": "drng", "allocated": "alloc"}


def sinfo(args: list[str], nodes: list[dict[str, Any]]) -> str:
    """sinfo's default summary (or -N, one line per node) of `nodes`."""
    given, words = read_options(args, {}, SINFO_FLAGS, "use -N, -h, -a or -l")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    opts = dict(given)
    lines = []
    if "node" in opts:
        if "noheader" not in opts:
            lines.append(f"{'NODELIST':<10} {'NODES':>5} {'PARTITION':<9} {'STATE':<5}")
        for n in nodes:
            for part in n["partitions"] or ["main"]:
                lines.append(f"{n['node']:<10} {1:>5} {part:<9} {_state(n):<5}")
        return "\n".join(lines)
    if "noheader" not in opts:
        lines.append(f"{'PARTITION':<9} {'AVAIL':>5} {'TIMELIMIT':>10} {'NODES':>6} "
                     f"{'STATE':<6} NODELIST")  # fmt: skip
    groups: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        for part in n["partitions"] or ["main"]:
            groups.setdefault((part, _state(n)), []).append(n["node"])
    for (part, state), names in groups.items():
        lines.append(f"{part:<9} {'up':>5} {'infinite':>10} {len(names):>6} {state:<6} "
                     f"{','.join(names)}")  # fmt: skip
    return "\n".join(lines)


def _state(node: Mapping[str, Any]) -> str:
    state = str(node["state"])
    return STATE_NAMES.get(state, state)[:5]
