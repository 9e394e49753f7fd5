"""`squeue` inside jobs: Slurm's default columns, its common `-o/--format` fields, and
`--json` with the field names of Slurm 22.05's squeue for the fields Podium has.

Options: `-u/--user`, `-j/--jobs`, `-t/--states`, `-n/--name`, `--me`, `-h/--noheader`,
`-o/--format`, `--json`, `-r/--array` (a pending array's tasks one a line; without it
they are one, "12_[4-9%2]"), `-a/--all` (accepted: every partition is shown anyway),
`--start` (pending jobs with their expected start and nodes, from Podium's forecast).
"""

from __future__ import annotations

import os
import re

from podium.api.states import TERMINAL_STATES, slurm_reason
from podium.api.times import format_duration
from podium.slurm_commands.args import job_ids, read_options

TYPE_CHECKING = False  # typing itself is not loaded here: squeue is called in loops
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
COMPACT = {
    "PENDING": "PD",
    "RUNNING": "R",
    "COMPLETED": "CD",
    "COMPLETING": "CG",
    "CANCELLED": "CA",
    "FAILED": "F",
    "TIMEOUT": "TO",
    "PREEMPTED": "PR",
    "NODE_FAIL": "NF",
    "OUT_OF_MEMORY": "OOM",
    "SUSPENDED": "S",
    "REQUEUED": "RQ",
    "BOOT_FAIL": "BF",
    "DEADLINE": "DL",
}
VALUED = {"-u": "user", "--user": "user", "-j": "jobs", "--jobs": "jobs", "-t": "states"}
VALUED |= {"--states": "states", "-n": "name", "--name": "name", "-o": "format"}
VALUED |= {"--format": "format"}
FLAGS = {"-h": "noheader", "--noheader": "noheader", "--json": "json", "--me": "me"}
FLAGS |= {"-r": "array", "--array": "array"}  # a pending array's tasks one a line
FLAGS |= {"-a": "all", "--all": "all"}  # accepted: every partition is shown anyway
FLAGS |= {"--start": "start"}  # pending jobs with their expected start (the forecast)
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
_FIELD_RE = re.compile(r"%(\.)?(\d*)([a-zA-Z%])")


def _me() -> str:
    """The calling user's name, from its uid (its number where no name is known)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def _reason_or_nodes(job: Mapping[str, Any]) -> str:
    if job["state"] == "PENDING":
        return f"({job.get('reason') or 'None'})"
    if job["state"] in TERMINAL_STATES and not job.get("node"):  # never ran anywhere
        return f"({slurm_reason(job['state'], job.get('reason'))})"
    return str(job.get("node") or "")


# letter -> (title, the record keys it reads, its value); keys let squeue fetch only those
FIELDS: dict[str, tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], Any]]] = {
    "i": ("JOBID", ("display_id",), lambda j: j["display_id"]),
    "A": (
        "ARRAY_JOB_ID",
        ("array_job_id", "job_id"),
        lambda j: j.get("array_job_id") or j["job_id"],
    ),
    "K": (
        "ARRAY_TASK_ID",
        ("array_task_id", "array_task_string"),
        lambda j: (
            j.get("array_task_string")
            or ("N/A" if j.get("array_task_id") is None else j["array_task_id"])
        ),
    ),
    "j": ("NAME", ("name",), lambda j: j["name"]),
    "u": ("USER", ("user",), lambda j: j["user"]),
    "a": ("ACCOUNT", ("account",), lambda j: j["account"]),
    "P": ("PARTITION", ("partition",), lambda j: j["partition"]),
    "q": ("QOS", ("qos",), lambda j: j["qos"]),
    "t": ("ST", ("state",), lambda j: COMPACT.get(j["state"], j["state"])),
    "T": ("STATE", ("state",), lambda j: j["state"]),
    "M": ("TIME", ("elapsed_s",), lambda j: format_duration(j["elapsed_s"])),
    "l": ("TIME_LIMIT", ("time_limit_s",), lambda j: format_duration(j.get("time_limit_s"))),
    "D": ("NODES", ("node_count",), lambda j: j["node_count"]),
    "C": ("CPUS", ("cpus",), lambda j: j["cpus"]),
    "b": ("TRES_PER_NODE", ("gpus",), lambda j: f"gres:gpu:{j['gpus']}" if j["gpus"] else "N/A"),
    "N": ("NODELIST", ("node",), lambda j: j.get("node") or ""),
    "R": ("NODELIST(REASON)", ("state", "reason", "node"), _reason_or_nodes),
    "r": ("REASON", ("state", "reason"), lambda j: slurm_reason(j["state"], j.get("reason"))),
    "Z": ("WORK_DIR", ("work_dir",), lambda j: j["work_dir"]),
    "y": ("NICE", ("nice",), lambda j: j["nice"]),
    "V": ("SUBMIT_TIME", ("submit_time",), lambda j: (j.get("submit_time") or "N/A")[:19]),
    "S": ("START_TIME", ("start_time",), lambda j: (j.get("start_time") or "N/A")[:19]),
    "e": ("END_TIME", ("end_time",), lambda j: (j.get("end_time") or "N/A")[:19]),
    "Y": ("SCHEDNODES", ("job_id",), lambda j: j.get("sched_nodes") or "(null)"),  # --start
}
FILTER_KEYS = ("job_id", "array_job_id", "user", "state", "name")  # what -u -j -t -n read
ARRAY_KEYS = ("array_task_id", "array_task_string", "display_id")  # what -r reads


def render(
    jobs: Sequence[Mapping[str, Any]],
    fmt: str,
    header: bool,
    fields: Mapping[str, tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], Any]]] = FIELDS,
) -> str:
    """The jobs as squeue prints them with `fmt` (its %[.][width]letter fields; a '.'
    right-justifies, a width pads or cuts, as in squeue); sinfo passes its own
    `fields`."""
    parts: list[tuple[str, bool, int | None, str | None]] = []  # (text, right, width, key)
    at = 0
    for match in _FIELD_RE.finditer(fmt):
        if match.start() > at:
            parts.append((fmt[at : match.start()], False, None, None))
        right, width, key = bool(match.group(1)), match.group(2), match.group(3)
        if key == "%":
            parts.append(("%", False, None, None))
        elif key not in fields:
            known = " ".join(f"%{k}" for k in fields)
            raise ValueError(f"format field %{key} is not supported here: use one of {known}")
        else:
            parts.append(("", right, int(width) if width else None, key))
        at = match.end()
    parts.append((fmt[at:], False, None, None))

    def line(value_of: Callable[[str], str]) -> str:
        out = []
        for text, right, width, key in parts:
            if key is None:
                out.append(text)
                continue
            value = value_of(key)
            if width is not None:
                value = value[:width]
                value = value.rjust(width) if right else value.ljust(width)
            out.append(value)
        return "".join(out).rstrip()

    lines = [line(lambda k: fields[k][0])] if header else []
    lines += [line(lambda k, j=job: str(fields[k][2](j))) for job in jobs]  # type: ignore[misc]
    return "\n".join(lines)


def slurm_json(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job record under Slurm 22.05 squeue --json's names (the fields Podium has)."""

    def epoch(key: str) -> int:
        value = job.get(key)
        return int(value) if value else 0

    limit = job.get("time_limit_s")
    return {
        "job_id": job["job_id"],
        "array_job_id": job.get("array_job_id") or 0,
        "array_task_id": job.get("array_task_id"),
        "array_task_string": job.get("array_task_string") or "",
        "name": job["name"],
        "user_name": job["user"],
        "user_id": job.get("uid"),
        "account": job["account"],
        "partition": job["partition"],
        "qos": job["qos"],
        "nice": job["nice"],
        "job_state": job["state"],
        "state_reason": job.get("reason") or "None",
        "nodes": job.get("node") or "",
        "node_count": job["node_count"],
        "cpus": job["cpus"],
        "tasks": job.get("ntasks") or 1,
        "tres_per_job": f"gres:gpu:{job['gpus']}" if job["gpus"] else "",
        "time_limit": limit // 60 if limit is not None else None,
        "submit_time": epoch("submit_epoch"),
        "start_time": epoch("start_epoch"),
        "end_time": epoch("end_epoch"),
        "restart_cnt": job["restart_count"],
        "current_working_directory": job["work_dir"],
        "standard_output": job.get("stdout") or "",
        "standard_error": job.get("stderr") or "",
        "comment": job.get("comment") or "",
        "wckey": job.get("wckey") or "",
        "dependency": job.get("dependency") or "",
    }


def format_keys(fmt: str) -> tuple[str, ...]:
    """The record keys a format reads, and those the filters read."""
    keys = dict.fromkeys(FILTER_KEYS)
    for match in _FIELD_RE.finditer(fmt):
        keys.update(dict.fromkeys(FIELDS.get(match.group(3), ("", (), None))[1]))
    return tuple(keys)


def squeue(
    args: list[str],
    jobs_of: Callable[[bool, tuple[str, ...] | None], list[dict[str, Any]]],
    forecast_of: Callable[[], list[dict[str, Any]]] | None = None,
) -> int:
    """Parse squeue's options, then print the jobs filtered and formatted.
    `jobs_of(all, keys)` gives pending and running jobs, or every job with `all` (for
    -t naming others), with at least those record keys (None: whole records).
    `--start` lists the pending jobs with `forecast_of()`'s expected starts (the
    records of GET /v1/forecast) as START_TIME and SCHEDNODES, as Slurm's does."""
    fmt, header, as_json, array, start = DEFAULT_FORMAT, True, False, False, False
    users: set[str] = set()
    ids: set[int] = set()
    states: set[str] = set()
    names: set[str] = set()
    given, words = read_options(args, VALUED, FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    for name, value in given:
        items = [v for v in value.split(",") if v]
        if name == "noheader":
            header = False
        elif name == "json":
            as_json = True
        elif name == "array":
            array = True
        elif name == "start":
            start = True
        elif name == "me":  # the caller's uid, as Slurm reads it: never $USER
            users.add(_me())
        elif name == "user":
            users.update(items)
        elif name == "jobs":
            ids.update(job_ids(value))
        elif name == "states":
            states.update(v.upper() for v in items)
            states.update(s for s, c in COMPACT.items() if c in states)
        elif name == "name":
            names.update(items)
        elif name == "format":
            fmt = value
    if start:
        fmt = START_FORMAT if fmt == DEFAULT_FORMAT else fmt
        states = states or {"PENDING"}
    render([], fmt, header=False)  # a bad format is refused before the cluster is asked
    everything = bool(states - {"PENDING", "RUNNING"})
    keys = None if as_json else format_keys(fmt) + (ARRAY_KEYS if array else ())
    listed = jobs_of(everything, keys)
    if array:
        from podium.api.arrays import expanded

        listed = [task for job in listed for task in expanded(job)]
    if start and forecast_of is not None:
        expected = {f["job_id"]: f for f in forecast_of()}
        for j in listed:
            found = expected.get(j["job_id"]) if j.get("state") == "PENDING" else None
            if found is not None:
                j["start_time"] = found.get("expected_start")
                j["sched_nodes"] = found.get("node")
    jobs = [
        j
        for j in listed
        if (not users or j["user"] in users)
        and (not ids or j["job_id"] in ids or j.get("array_job_id") in ids)
        and (not states or "ALL" in states or j["state"] in states)
        and (not names or j["name"] in names)
    ]
    if as_json:
        import json

        print(json.dumps({"jobs": [slurm_json(j) for j in jobs]}, indent=2))
    else:
        text = render(jobs, fmt, header)
        if text:
            print(text)
    return 0
