"""`sacct` and `sinfo` over Podium's records, in Slurm's default layouts.

sacct: each job, then its steps (ID.batch, ID.0, ...), with the default columns
`JobID JobName Partition Account AllocCPUS State ExitCode`. Options: `-j/--jobs`
(`12.0`: that step alone), `-u/--user`, `-s/--state`, `--name`, `-A`, `-r` (each
repeated option adds to its list), `-X/--allocations` (no steps), `-n/--noheader`,
`-P/--parsable2` (`|` between fields, no padding), `-p/--parsable` (a `|` after each),
`-o/--format` with the fields in FIELDS (`Name%20` widths too), `--json`
(podium.slurm_commands.sacct_json), `-a/--allusers` (every user's jobs are listed unless -u);
`-S`, `-E`, `-M`, `-L`, `-D`, `-T` and `--noconvert` are accepted and change nothing.

sinfo: one line per partition and node state, `PARTITION AVAIL TIMELIMIT NODES STATE
NODELIST`; `-N/--Node` one line per node; `-o/--format` with SINFO_FIELDS;
`-h/--noheader`; `-p`, `-n`, `-t` filter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podium.api.states import slurm_reason
from podium.api.times import format_duration
from podium.slurm_commands.args import job_ids, read_options
from podium.slurm_commands.squeue import COMPACT

SACCT_VALUED = {"-j": "jobs", "--jobs": "jobs", "-u": "user", "--user": "user"}
SACCT_VALUED |= {"--uid": "user", "-s": "state", "--state": "state", "-o": "format"}
SACCT_VALUED |= {"--format": "format", "--name": "name", "-A": "account"}
SACCT_VALUED |= {"--accounts": "account", "-r": "partition", "--partition": "partition"}
# accepted: Podium keeps every job it ran, on its one cluster
SACCT_VALUED |= {"-S": "starttime", "--starttime": "starttime", "-E": "endtime"}
SACCT_VALUED |= {"--endtime": "endtime", "-M": "clusters", "--clusters": "clusters"}
SACCT_FLAGS = {"-X": "allocations", "--allocations": "allocations", "-n": "noheader"}
SACCT_FLAGS |= {"--noheader": "noheader", "-P": "parsable2", "--parsable2": "parsable2"}
SACCT_FLAGS |= {"-p": "parsable", "--parsable": "parsable", "-a": "all", "--allusers": "all"}
SACCT_FLAGS |= {"--json": "json", "-L": "all_clusters", "--allclusters": "all_clusters"}
SACCT_FLAGS |= {"-D": "duplicates", "--duplicates": "duplicates", "--noconvert": "noconvert"}
SACCT_FLAGS |= {"-T": "truncate", "--truncate": "truncate"}
# options whose values add to one list each time they are given, as sacct's do
LISTS = ("jobs", "user", "state", "name", "account", "partition")
DEFAULT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
Row = Mapping[str, Any]


def _acct_state(job: Row) -> str:
    """A job's state as accounting has it: a COMPLETING job's is the end it was given
    (CANCELLED: scancel's), as slurmdbd records it at once."""
    if job["state"] == "COMPLETING":
        return str(job.get("ending") or "RUNNING")
    return str(job["state"])


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
    "state": ("State", 10, _acct_state, lambda j, s: s["state"]),
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
    "reason": (
        "Reason",
        20,
        lambda j: slurm_reason(j["state"], j.get("reason")),
        lambda j, s: "None",
    ),
    "qos": ("QOS", 10, lambda j: j.get("qos") or "", lambda j, s: ""),
    "comment": ("Comment", 20, lambda j: j.get("comment") or "", lambda j, s: ""),
    "submit": (
        "Submit",
        19,
        lambda j: (j.get("submit_time") or "Unknown")[:19],
        lambda j, s: (s["start_time"] or "Unknown")[:19],
    ),
    "elapsedraw": (
        "ElapsedRaw",
        10,
        lambda j: int(j["elapsed_s"]),
        lambda j, s: int(s["elapsed_s"]),
    ),
    "timelimitraw": (
        "TimelimitRaw",
        12,
        lambda j: "UNLIMITED" if j.get("time_limit_s") is None else j["time_limit_s"] // 60,
        lambda j, s: "",
    ),
    "reqcpus": ("ReqCPUS", 8, lambda j: j["cpus"], lambda j, s: ""),
    "reqmem": ("ReqMem", 10, lambda j: f"{j.get('mem_mb') or 0}M", lambda j, s: ""),
    "uid": ("UID", 6, lambda j: j.get("uid") if j.get("uid") is not None else "", lambda j, s: ""),
    "cluster": ("Cluster", 10, lambda j: "podium", lambda j, s: ""),
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
    """sacct's output for `args`, from `acct()` (job records, each with its steps;
    pending jobs too, a pending array's tasks as one "12_[0-3%2]" record)."""
    given, words = read_options(args, SACCT_VALUED, SACCT_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r} (job ids go with -j)")
    opts = dict(given)
    lists: dict[str, set[str]] = {}
    for name, value in given:
        if name in LISTS:
            lists.setdefault(name, set()).update(v.strip() for v in value.split(",") if v.strip())
    columns = [_column(name) for name in (opts.get("format") or DEFAULT).split(",") if name]
    wanted, steps_of = _job_and_step_ids(lists.get("jobs", set()))
    states = {s.upper() for s in lists.get("state", ())}
    jobs = [
        j
        for j in acct()
        if (not wanted or j["job_id"] in wanted or j.get("array_job_id") in wanted)
        and (
            "user" not in lists or j["user"] in lists["user"] or str(j.get("uid")) in lists["user"]
        )
        and (not states or _acct_state(j) in states or COMPACT.get(_acct_state(j)) in states)
        and ("name" not in lists or j["name"] in lists["name"])
        and ("account" not in lists or j["account"] in lists["account"])
        and ("partition" not in lists or j["partition"] in lists["partition"])
    ]
    if "json" in opts:
        from podium.slurm_commands.sacct_json import sacct_json

        return sacct_json(jobs, [_acct_state(j) for j in jobs], steps="allocations" not in opts)
    rows: list[list[str]] = []
    for job in jobs:
        only = steps_of.get(job["job_id"])  # `-j 12.0`: that step's line alone
        if only is None:
            rows.append([str(get(job)) for _, _, get, _ in columns])
        if "allocations" not in opts or only is not None:
            for step in job.get("steps", []):
                if only is None or str(step["step_id"]) in only:
                    rows.append([str(get(job, step)) for _, _, _, get in columns])
    return _table(columns, rows, "noheader" not in opts, opts)


def _job_and_step_ids(words: set[str]) -> tuple[set[int], dict[int, set[str]]]:
    """The job ids `-j` names, and the steps named of those it names only by step
    (`12.0`, `12.batch`); raises ValueError in sacct's words."""
    jobs: set[int] = set()
    whole: set[int] = set()
    steps: dict[int, set[str]] = {}
    for word in words:
        base, dot, step = word.partition(".")
        (job_id,) = job_ids(base)
        jobs.add(job_id)
        if not dot:
            whole.add(job_id)
        elif step and (step.isdigit() or step in ("batch", "extern")):
            steps.setdefault(job_id, set()).add(step)
        else:
            raise ValueError(f"invalid job step {word!r}: expected 12.0 or 12.batch")
    return jobs, {j: s for j, s in steps.items() if j not in whole}


def _column(spec: str) -> tuple[str, int, Callable[[Row], Any], Callable[[Row, Row], Any]]:
    name, _, width = spec.strip().partition("%")
    if name.lower() not in FIELDS:
        known = ", ".join(h for h, *_ in FIELDS.values())
        raise ValueError(f"invalid field {name!r}: known fields are {known}")
    header, default, of_job, of_step = FIELDS[name.lower()]
    size = width.removeprefix("-")
    if width and not (size.isdigit() and int(size) > 0):
        raise ValueError(f"invalid width {width!r} in {spec.strip()!r}: expected e.g. Name%20")
    return header, int(width) if width else default, of_job, of_step


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
        lines.append(" ".join(_fit(c[0], c[1], cut="") for c in columns))
        lines.append(" ".join("-" * abs(c[1]) for c in columns))
    for r in rows:
        lines.append(" ".join(_fit(v, c[1]) for v, c in zip(r, columns, strict=True)))
    return "\n".join(lines)


def _fit(text: str, width: int, cut: str = "+") -> str:
    """A cell as sacct prints it: right-justified in `width` (left for a negative one);
    a value too long keeps its first width-1 characters and a '+' ("CANCELLED+"), a
    header its first width."""
    size = abs(width)
    if len(text) > size:
        text = text[: size - len(cut)] + cut
    return f"{text:<{size}}" if width < 0 else f"{text:>{size}}"


SINFO_FLAGS = {"-N": "node", "--Node": "node", "-h": "noheader", "--noheader": "noheader"}
SINFO_FLAGS |= {"-a": "all", "--all": "all", "-l": "long", "--long": "long"}
SINFO_FLAGS |= {"--noconvert": "noconvert", "-e": "exact", "--exact": "exact"}  # accepted
SINFO_VALUED = {"-o": "format", "--format": "format", "-p": "partition", "--partition": "partition"}
SINFO_VALUED |= {"-n": "nodes", "--nodes": "nodes", "-t": "states", "--states": "states"}
STATE_NAMES = {"drained": "drain", "draining": "drng", "allocated": "alloc"}
SUMMARY = "%9P %.5a %.10l %.6D %.6t %N"  # sinfo 22.05's default
BY_NODE = "%10N %.6D %9P %6t"  # sinfo -N's, names up to 10 wide
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
}


def sinfo(args: list[str], nodes: list[dict[str, Any]]) -> str:
    """sinfo's summary (or -N, one line per node; or -o FORMAT) of `nodes`: nodes whose
    fields print alike share a line, as sinfo groups them. `-p`, `-n`, `-t` filter."""
    given, words = read_options(args, SINFO_VALUED, SINFO_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    opts = dict(given)
    fmt = opts.get("format") or (BY_NODE if "node" in opts else SUMMARY)
    from podium.slurm_commands.squeue import render

    render([], fmt, False, SINFO_FIELDS)  # a bad format is refused first
    wanted = {k: set(v.split(",")) for k, v in opts.items() if k in ("partition", "nodes")}
    states = {s.lower() for s in opts.get("states", "").split(",") if s}
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
    return render(rows, fmt, "noheader" not in opts, SINFO_FIELDS)
