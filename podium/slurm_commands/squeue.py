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
import sys

from podium.slurm_commands.args import InSlurmsWords, job_ids, read_options
from podium.slurm_commands.squeue_fields import (
    COMPACT,
    FIELDS,
    NAME_TIMES,
    NAMED,
    TIME_LETTERS,
    job_states,
)

TYPE_CHECKING = False  # typing itself is not loaded here: squeue is called in loops
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"  # squeue -l, after a date line
VALUED = {"-u": "user", "--user": "user", "-j": "jobs", "--jobs": "jobs", "-t": "states"}
VALUED |= {"--states": "states", "-n": "name", "--name": "name", "-o": "format"}
VALUED |= {"--format": "format", "-O": "Format", "--Format": "Format"}
VALUED |= {"-p": "partition", "--partition": "partition"}
FLAGS = {"-h": "noheader", "--noheader": "noheader", "--json": "json", "--me": "me"}
FLAGS |= {"-r": "array", "--array": "array"}  # a pending array's tasks one a line
FLAGS |= {"-a": "all", "--all": "all"}  # accepted: every partition is shown anyway
FLAGS |= {"--start": "start"}  # pending jobs with their expected start (the forecast)
FLAGS |= {"-l": "long", "--long": "long"}
START_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"
_FIELD_RE = re.compile(r"%(\.)?(\d*)([a-zA-Z%])")


class JobsUnknown(InSlurmsWords):
    """No job of those -j names exists: Slurm's words, without squeue's prefix."""


_BAD_STATE = "Invalid job state specified: {word} (valid job states include: {valid}, or all)"


def _user_names(words: list[str]) -> list[str]:
    """The users `-u` names (names or uids, as Slurm takes them); an unknown one is
    said on stderr and matches no job, as Slurm's squeue does (it goes on, exit 0)."""
    import pwd

    names = []
    for word in words:
        try:
            names.append(pwd.getpwuid(int(word)).pw_name if word.isdigit() else word)
            if not word.isdigit():
                pwd.getpwnam(word)
        except (KeyError, OverflowError):
            print(f"squeue: error: Invalid user: {word}\n", file=sys.stderr)
            names.append(word)  # a user no job has
    return names


def _me() -> str:
    """The calling user's name, from its uid (its number where no name is known)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


FILTER_KEYS = (
    "job_id",
    "array_job_id",
    "user",
    "state",
    "name",
    "partition",
    "held",
)  # -u -j -t -n -p, the sort
ARRAY_KEYS = ("array_task_id", "array_task_string", "display_id")  # what -r reads


def render(
    jobs: Sequence[Mapping[str, Any]],
    fmt: str,
    header: bool,
    fields: Mapping[str, tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], Any]]] = FIELDS,
    uncut: frozenset[str] = TIME_LETTERS,
) -> str:
    """The jobs as squeue prints them with `fmt` (its %[.][width]letter fields; a '.'
    right-justifies, a width pads or cuts, as in squeue, but for the times in `uncut`,
    which it only pads); sinfo passes its own `fields`."""
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

    def line(value_of: Callable[[str], str], title: bool = False) -> str:
        out = []
        for text, right, width, key in parts:
            if key is None:
                out.append(text)
                continue
            value = value_of(key)
            if width is not None:  # a title is cut always, a duration's value never
                value = value if key in uncut and not title else value[:width]
                value = value.rjust(width) if right else value.ljust(width)
            out.append(value)
        return "".join(out)  # padding kept, as Slurm prints it

    lines = [line(lambda k: fields[k][0], title=True)] if header else []
    lines += [line(lambda k, j=job: str(fields[k][2](j))) for job in jobs]  # type: ignore[misc]
    return "\n".join(lines)


def render_named(jobs: Sequence[Mapping[str, Any]], spec: str, header: bool) -> str:
    """The jobs as `squeue -O SPEC` prints them: each `Name[:[.]size]` (size 20 by
    default, left-justified unless '.'), one after the other with no separator; a
    value longer than its size is cut (a time is not)."""
    columns = []
    for item in spec.split(","):
        name, _, size = item.strip().partition(":")
        field = NAMED.get(name.lower())
        if field is None:
            known = ", ".join(sorted(NAMED))
            raise ValueError(f"invalid -O field {name!r}: fields known here are {known}")
        right = size.startswith(".")
        width = size.lstrip(".")
        if width and not width.isdigit():
            raise ValueError(f"invalid -O size {size!r} in {item.strip()!r}: e.g. Name:20")
        columns.append((field, right, int(width) if width else 20, name.lower() in NAME_TIMES))

    def cell(text: str, right: bool, width: int, time_like: bool) -> str:
        text = text if time_like else text[:width]
        return text.rjust(width) if right else text.ljust(width)

    lines = []
    if header:
        lines.append("".join(cell(f[0], r, w, t) for f, r, w, t in columns))
    for job in jobs:
        lines.append("".join(cell(str(f[2](job)), r, w, t) for f, r, w, t in columns))
    return "\n".join(lines)


def slurm_order(job: Mapping[str, Any]) -> tuple[Any, ...]:
    """squeue's default order (its sort "P,t,-p"): by partition, then state as its
    compact name sorts, then priority, highest first: a held job's is 0, the others'
    alike here, so the newest comes first, as Slurm lists jobs of equal priority."""
    held = bool(job.get("held"))
    return (job.get("partition") or "", COMPACT.get(job["state"], job["state"]), held,
            -int(job.get("job_id") or 0))  # fmt: skip


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
    q = _Query(args)
    if q.named is not None:
        render_named([], q.named, header=False)  # a bad -O is refused first
    render([], q.fmt, header=False)  # a bad format is refused before the cluster is asked
    everything = bool(q.states - {"PENDING", "RUNNING"})
    keys = (
        None
        if q.as_json or q.named is not None
        else format_keys(q.fmt) + (ARRAY_KEYS if q.array else ())
    )
    listed = jobs_of(everything, keys)
    if q.array:
        from podium.api.arrays import expanded

        listed = [task for job in listed for task in expanded(job)]
    if q.start and forecast_of is not None:
        _add_expected_starts(listed, forecast_of())
    jobs = sorted((j for j in listed if q.keeps(j)), key=slurm_order)
    if q.ids and not any(j["job_id"] in q.ids or j.get("array_job_id") in q.ids for j in listed):
        raise JobsUnknown("slurm_load_jobs error: Invalid job id specified")
    if q.as_json:
        import json

        print(json.dumps({"jobs": [slurm_json(j) for j in jobs]}, indent=2))
        return 0
    if q.long:
        import time

        print(time.asctime())
    text = (
        render_named(jobs, q.named, q.header)
        if q.named is not None
        else render(jobs, q.fmt, q.header)
    )
    if text:
        print(text)
    if "%-" in q.fmt:  # Slurm prints such a field as it is, then says so
        print("squeue: error: Invalid job format specification: -", file=sys.stderr)
    return 0


class _Query:
    """What squeue was asked: the filters and how to print (a plain class: squeue is
    called in loops and loads as little as it can)."""

    def __init__(self, args: list[str]) -> None:
        """Read squeue's options (ValueError: one line on what is wrong), then its
        environment (SQUEUE_FORMAT, SQUEUE_FORMAT2) as Slurm's reads it."""
        self.fmt, self.header, self.as_json = DEFAULT_FORMAT, True, False
        self.array = self.start = self.long = False
        self.named: str | None = None
        self.partitions: set[str] = set()
        self.users: set[str] = set()
        self.ids: set[int] = set()
        self.states: set[str] = set()
        self.names: set[str] = set()
        given, words = read_options(
            args, VALUED, FLAGS, "see docs/slurm-compat.md", optional=("jobs",)
        )
        if words and any(name == "jobs" and not value for name, value in given):
            given.append(("jobs", words.pop(0)))  # `-j 12`: squeue takes the word after -j
        if words:
            raise ValueError(f"unexpected argument {words[0]!r}")
        for name, value in given:
            self._take(name, value)
        if self.fmt == DEFAULT_FORMAT and self.named is None:  # squeue's environment
            if os.environ.get("SQUEUE_FORMAT"):
                self.fmt = os.environ["SQUEUE_FORMAT"]
            elif os.environ.get("SQUEUE_FORMAT2"):
                self.named = os.environ["SQUEUE_FORMAT2"]
        if self.long and self.fmt == DEFAULT_FORMAT:
            self.fmt = LONG_FORMAT
        if self.start:
            self.fmt = START_FORMAT if self.fmt == DEFAULT_FORMAT else self.fmt
            self.states = self.states or {"PENDING"}

    def _take(self, name: str, value: str) -> None:
        items = [v for v in value.split(",") if v]
        if name == "noheader":
            self.header = False
        elif name == "json":
            self.as_json = True
        elif name == "array":
            self.array = True
        elif name == "start":
            self.start = True
        elif name == "me":  # the caller's uid, as Slurm reads it: never $USER
            self.users.add(_me())
        elif name == "user":
            self.users.update(_user_names(items))
        elif name == "jobs" and value:  # a bare -j: every job, as Slurm's
            self.ids.update(job_ids(value))
        elif name == "states":
            self.states.update(job_states(items, _BAD_STATE))
        elif name == "name":
            self.names.update(items)
        elif name == "format":
            self.fmt = value
        elif name == "Format":
            self.named = value
        elif name == "long":
            self.long = True
        elif name == "partition":
            self.partitions.update(items)

    def keeps(self, j: Mapping[str, Any]) -> bool:
        """Whether job record `j` passes every filter asked for."""
        return (
            (not self.users or j["user"] in self.users)
            and (not self.ids or j["job_id"] in self.ids or j.get("array_job_id") in self.ids)
            and (not self.states or "ALL" in self.states or j["state"] in self.states)
            and (not self.names or j["name"] in self.names)
            and (not self.partitions or j["partition"] in self.partitions)
        )


def _add_expected_starts(listed: list[dict[str, Any]], forecast: list[dict[str, Any]]) -> None:
    """Pending jobs get the forecast's expected start and node (START_TIME, SCHEDNODES)."""
    expected = {f["job_id"]: f for f in forecast}
    for j in listed:
        found = expected.get(j["job_id"]) if j.get("state") == "PENDING" else None
        if found is not None:
            j["start_time"] = found.get("expected_start")
            j["sched_nodes"] = found.get("node")
