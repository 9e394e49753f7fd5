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

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podium.api.slurm_reasons import accounted_reason
from podium.api.times import format_duration
from podium.slurm_commands.args import job_ids, read_options
from podium.slurm_commands.slurm_text import slurm_duration, slurm_stamp
from podium.slurm_commands.squeue_fields import job_states

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
_BAD_STATE = "unrecognized job state value '{word}' (job states: {valid})"
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
    "jobid": ("JobID", -12, lambda j: j["display_id"], lambda j, s: s["display_id"]),
    "jobidraw": (
        "JobIDRaw",
        -12,
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
        lambda j: slurm_duration(j["elapsed_s"]),
        lambda j, s: slurm_duration(s["elapsed_s"]),
    ),
    "start": (
        "Start",
        19,
        lambda j: slurm_stamp(j["start_time"]),
        lambda j, s: slurm_stamp(s["start_time"]),
    ),
    "end": (
        "End",
        19,
        lambda j: slurm_stamp(j["end_time"]),
        lambda j, s: slurm_stamp(s["end_time"]),
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
        10,
        lambda j: _slurm_tres(j),
        lambda j, s: _tres(j["cpus"], len(s["gpu_ids"])),
    ),
    "wckey": ("WCKey", 10, lambda j: j.get("wckey") or "", lambda j, s: ""),
    "timelimit": (
        "Timelimit",
        10,
        lambda j: format_duration(j.get("time_limit_s")),
        lambda j, s: "",
    ),
    "workdir": ("WorkDir", 20, lambda j: j["work_dir"], lambda j, s: ""),
    "reason": (  # the reason it waited: None once it started, as slurmdbd keeps it
        "Reason",
        22,
        lambda j: accounted_reason(j["state"], j.get("reason"), bool(j.get("start_epoch"))),
        lambda j, s: "None",
    ),
    "qos": ("QOS", 10, lambda j: j.get("qos") or "", lambda j, s: ""),
    "comment": ("Comment", 14, lambda j: j.get("comment") or "", lambda j, s: ""),
    "group": ("Group", 9, lambda j: _group_name(j.get("uid")), lambda j, s: ""),
    "derivedexitcode": ("DerivedExitCode", 15, lambda j: _derived(j), lambda j, s: ""),
    "submit": (
        "Submit",
        19,
        lambda j: slurm_stamp(j.get("submit_time")),
        lambda j, s: slurm_stamp(s["start_time"]),
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
    chosen = opts.get("format") or os.environ.get("SACCT_FORMAT") or DEFAULT
    columns = [_column(name) for name in chosen.split(",") if name]
    wanted, steps_of = _job_and_step_ids(lists.get("jobs", set()))
    states = job_states(sorted(lists.get("state", ())), _BAD_STATE) - {"ALL"}
    # With -s and no -S, Slurm's window is now: a job is listed in the state it is in
    # now, so none that ended before (sacct -s F lists nothing without -S).
    since = "starttime" in opts
    jobs = [
        j
        for j in acct()
        if _eligible(j)
        if (not wanted or j["job_id"] in wanted or j.get("array_job_id") in wanted)
        and (
            "user" not in lists or j["user"] in lists["user"] or str(j.get("uid")) in lists["user"]
        )
        and (not states or _acct_state(j) in states)
        and (not states or since or j["state"] in ("RUNNING", "PENDING"))
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
    if name.lower() not in FIELDS:  # sacct's words (sacct --helpformat: Slurm's list)
        raise ValueError(f'Invalid field requested: "{name}"')
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
    lines = []  # each field is followed by a space, the last too, as sacct prints it
    if header:
        lines.append("".join(_fit(c[0], c[1], cut="") + " " for c in columns))
        lines.append("".join("-" * abs(c[1]) + " " for c in columns))
    for r in rows:
        lines.append("".join(_fit(v, c[1]) + " " for v, c in zip(r, columns, strict=True)))
    return "\n".join(lines)


# A job waiting for one of these was never eligible: sacct does not list it.
_NOT_ELIGIBLE = frozenset(
    {"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime"}
)


def _eligible(job: Row) -> bool:
    """Whether sacct lists the job: it started, or waits while eligible to start."""
    return job["state"] != "PENDING" or job.get("reason") not in _NOT_ELIGIBLE


def _slurm_tres(job: Row) -> str:
    """AllocTRES as slurmdbd writes it: billing, cpu, gres/gpu, mem and node, in that
    (alphabetical) order; empty while the job waits."""
    if job["state"] == "PENDING":
        return ""
    parts = [f"billing={job['cpus']}", f"cpu={job['cpus']}"]
    if job.get("gpus"):
        parts.append(f"gres/gpu={job['gpus']}")
    parts += [f"mem={job.get('mem_mb') or 0}M", f"node={job.get('node_count') or 1}"]
    return ",".join(parts)


def _derived(job: Row) -> str:
    """DerivedExitCode: the highest exit code of its srun steps (never the batch
    shell's, which ExitCode is), 0:0 without any."""
    codes = [s for s in job.get("steps") or [] if s.get("step_id") not in ("batch", "extern")]
    if not codes:
        return "0:0"
    worst = max(codes, key=lambda s: (s.get("exit_code") or 0, s.get("signal") or 0))
    return _exit(worst)


def _group_name(uid: Any) -> str:
    """A user's primary group by name, as sacct's Group shows it."""
    import grp
    import pwd

    try:
        return grp.getgrgid(pwd.getpwuid(int(uid)).pw_gid).gr_name
    except (KeyError, TypeError, ValueError):
        return ""


def _fit(text: str, width: int, cut: str = "+") -> str:
    """A cell as sacct prints it: right-justified in `width` (left for a negative one);
    a value too long keeps its first width-1 characters and a '+' ("CANCELLED+"), a
    header its first width."""
    size = abs(width)
    if len(text) > size:
        text = text[: size - len(cut)] + cut
    return f"{text:<{size}}" if width < 0 else f"{text:>{size}}"


__all__ = ["FIELDS", "sacct"]
