"""squeue's output fields as Slurm 22.05 prints them: each `-o/--format` letter (title,
the record keys it reads, its value) and each `-O/--Format` name (title, letter), held
to the real squeue by tests/integration/test_slurm_differential.py."""

from __future__ import annotations

import re

from podium.api.slurm_reasons import ENDED, slurm_reason
from podium.api.times import format_duration
from podium.slurm_commands.slurm_text import slurm_stamp, slurm_time

TYPE_CHECKING = False  # typing itself is not loaded here: squeue is called in loops
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Field = tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], Any]]

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

# Every job state Slurm 22.05's squeue and sacct take (those Podium never has match no
# job), in the order squeue lists them when it refuses one.
SLURM_JOB_STATES = (
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "COMPLETING",
    "CONFIGURING", "RESIZING", "RESV_DEL_HOLD", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
    "REVOKED", "SIGNALING", "SPECIAL_EXIT", "STAGE_OUT", "STOPPED",
)  # fmt: skip
_SHORT_STATES = {
    "CF": "CONFIGURING", "RS": "RESIZING", "RD": "RESV_DEL_HOLD", "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD", "RV": "REVOKED", "SI": "SIGNALING", "SE": "SPECIAL_EXIT",
    "SO": "STAGE_OUT", "ST": "STOPPED",
}  # fmt: skip


def job_states(words: list[str], refusal: str) -> set[str]:
    """The job states `words` name (full or compact, any case; `ALL`), each as its full
    name; a word that names none raises ValueError(`refusal` with {word} and {valid}
    filled in)."""
    short = {c: s for s, c in COMPACT.items()} | _SHORT_STATES
    states: set[str] = set()
    for word in words:
        upper = word.strip().upper()
        if upper in SLURM_JOB_STATES or upper == "ALL":
            states.add(upper)
        elif upper in short:
            states.add(short[upper])
        else:
            raise ValueError(refusal.format(word=word, valid=",".join(SLURM_JOB_STATES)))
    return states


TIME_LETTERS = frozenset("MlL")  # durations are padded to their width, never cut (as Slurm)


def _reason_or_nodes(job: Mapping[str, Any]) -> str:
    """%R: a waiting job's reason in parentheses, else its nodes; an ended job's reason
    when Slurm gives it one (FAILED: NonZeroExitCode), else the nodes it ran on."""
    state = job["state"]
    if state == "PENDING":
        return f"({job.get('reason') or 'None'})"
    if state in ENDED:
        said = slurm_reason(state, job.get("reason"))
        if said != "None" or not job.get("node"):
            return f"({said})"
    return str(job.get("node") or "")


def _group(job: Mapping[str, Any], numeric: bool) -> str:
    import pwd

    uid = job.get("uid")
    try:
        gid = pwd.getpwuid(int(uid)).pw_gid if uid is not None else None
    except (KeyError, ValueError):
        gid = None
    if gid is None or numeric:
        return "(null)" if gid is None else str(gid)
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _time_left(job: Mapping[str, Any]) -> str:
    limit = job.get("time_limit_s")
    if limit is None:
        return "UNLIMITED"
    if job["state"] == "PENDING":
        return format_duration(limit)
    return format_duration(max(0.0, limit - (job.get("elapsed_s") or 0.0)))


def _stamp(epoch: float) -> str:
    return slurm_time(epoch)


def _end(job: Mapping[str, Any]) -> str:
    """%e: when it ended, or a running job's limit's end; N/A while it waits."""
    if job.get("end_time"):
        return slurm_stamp(job["end_time"])
    limit = job.get("time_limit_s")
    if job["state"] == "RUNNING" and limit is not None and job.get("start_epoch"):
        return _stamp(job["start_epoch"] + limit)
    if job["state"] == "PENDING":  # Slurm: NONE once --begin set one, else N/A
        return "NONE" if job.get("begin_epoch") else "N/A"
    return "NONE"


def _start(job: Mapping[str, Any]) -> str:
    """%S: when it started; for a waiting job, the time it may start from (--begin)."""
    if job.get("start_time"):
        return slurm_stamp(job["start_time"])
    begin = job.get("begin_epoch")
    return _stamp(begin) if job["state"] == "PENDING" and begin else "N/A"


def _dependency(job: Mapping[str, Any]) -> str:
    """%E: the dependency, each part marked as Slurm marks it while the job waits:
    (unfulfilled), or (failed) once it can never be met."""
    text = job.get("dependency")
    if not text:
        return "(null)"
    if job["state"] != "PENDING":
        return str(text)
    mark = "(failed)" if job.get("reason") == "DependencyNeverSatisfied" else "(unfulfilled)"
    parts = re.split(r"([,?])", str(text))
    return "".join(p if p in ",?" else p + mark for p in parts)


def _per_node_gres(job: Mapping[str, Any]) -> str:
    """%b: GPUs asked per node (--gpus-per-node, --gres); a job's GPUs asked in all
    (-G) are not per node, and Slurm prints N/A for them."""
    per_node = job.get("gpus_per_node")
    return f"gres:gpu:{per_node}" if per_node else "N/A"


def _per_cpu_mb(job: Mapping[str, Any]) -> str:
    """%m: the memory asked as it was asked: per node (--mem) or per CPU (--mem-per-cpu,
    and the partition's default), as "1000M"."""
    mem = int(job.get("mem_mb") or 0)
    if job.get("mem_per") == "node":
        return f"{mem}M"
    return f"{mem // max(1, int(job['cpus']))}M"


def _per_task_cpus(job: Mapping[str, Any]) -> int:
    return max(1, int(job["cpus"]) // max(1, int(job.get("ntasks") or 1)))


def _null(value: Any) -> str:
    return "(null)" if value in (None, "") else str(value)


# letter -> (title, the record keys it reads, its value); keys let squeue fetch only those
FIELDS: dict[str, Field] = {
    "i": ("JOBID", ("display_id",), lambda j: j["display_id"]),
    "A": ("JOBID", ("array_job_id", "job_id"), lambda j: j.get("array_job_id") or j["job_id"]),
    "F": (
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
    "U": ("UID", ("uid",), lambda j: _null(j.get("uid"))),
    "g": ("GROUP", ("uid",), lambda j: _group(j, numeric=False)),
    "G": ("GROUP", ("uid",), lambda j: _group(j, numeric=True)),
    "a": ("ACCOUNT", ("account",), lambda j: j["account"]),
    "P": ("PARTITION", ("partition",), lambda j: j["partition"]),
    "q": ("QOS", ("qos",), lambda j: j["qos"]),
    "t": ("ST", ("state",), lambda j: COMPACT.get(j["state"], j["state"])),
    "T": ("STATE", ("state",), lambda j: j["state"]),
    "M": ("TIME", ("elapsed_s",), lambda j: format_duration(j["elapsed_s"])),
    "l": ("TIME_LIMIT", ("time_limit_s",), lambda j: format_duration(j.get("time_limit_s"))),
    "L": ("TIME_LEFT", ("time_limit_s", "state", "elapsed_s"), _time_left),
    "D": ("NODES", ("node_count",), lambda j: j["node_count"]),
    "C": ("CPUS", ("cpus",), lambda j: j["cpus"]),
    "m": ("MIN_MEMORY", ("mem_mb", "cpus", "mem_per"), _per_cpu_mb),
    "b": ("TRES_PER_NODE", ("gpus_per_node",), _per_node_gres),
    "N": ("NODELIST", ("node",), lambda j: j.get("node") or ""),
    "n": ("REQ_NODES", (), lambda j: ""),
    "R": ("NODELIST(REASON)", ("state", "reason", "node"), _reason_or_nodes),
    "r": ("REASON", ("state", "reason"), lambda j: slurm_reason(j["state"], j.get("reason"))),
    "E": ("DEPENDENCY", ("dependency", "state", "reason"), _dependency),
    "f": ("FEATURES", (), lambda j: "(null)"),
    "o": ("COMMAND", (), lambda j: "(null)"),
    "Z": ("WORK_DIR", ("work_dir",), lambda j: j["work_dir"]),
    "y": ("NICE", ("nice",), lambda j: j["nice"]),
    "V": ("SUBMIT_TIME", ("submit_time",), lambda j: slurm_stamp(j.get("submit_time"), "N/A")),
    "S": ("START_TIME", ("start_time", "state", "begin_epoch"), _start),
    "e": ("END_TIME", ("end_time", "state", "time_limit_s", "start_epoch", "begin_epoch"), _end),
    "Y": ("SCHEDNODES", ("job_id",), lambda j: j.get("sched_nodes") or "(null)"),  # --start
}

# The fields only -O names (no letter of their own), as FIELDS' entries.
_MORE: dict[str, Field] = {
    "jobid": ("JOBID", ("array_job_id", "job_id"), lambda j: j.get("array_job_id") or j["job_id"]),
    "arrayjobid": FIELDS["F"],
    "comment": ("COMMENT", ("comment",), lambda j: _null(j.get("comment"))),
    "wckey": ("WCKEY", ("wckey",), lambda j: _null(j.get("wckey"))),
    "exit_code": ("EXIT_CODE", ("exit_code", "signal"),
                  lambda j: ((j.get("exit_code") or 0) << 8) | (j.get("signal") or 0)),
    "mincpus": ("MIN_CPUS", ("cpus", "ntasks"), lambda j: _per_task_cpus(j)),
    "numtasks": ("TASKS", ("ntasks",), lambda j: j.get("ntasks") or 1),
    "restartcnt": ("RESTART_COUNT", ("restart_count",), lambda j: j["restart_count"]),
    "stderr": ("STDERR", ("stderr",), lambda j: _null(j.get("stderr"))),
    "stdout": ("STDOUT", ("stdout",), lambda j: _null(j.get("stdout"))),
    "feature": FIELDS["f"],
}  # fmt: skip
# -O name (lower case) -> its letter's field, as squeue's print.c pairs them
_BY_LETTER = {
    "account": "a", "arraytaskid": "K", "command": "o", "dependency": "E", "endtime": "e",
    "groupid": "G", "groupname": "g", "jobarrayid": "i", "minmemory": "m", "name": "j",
    "nice": "y", "nodelist": "N", "numcpus": "C", "numnodes": "D", "partition": "P",
    "qos": "q", "reason": "r", "reasonlist": "R", "reqnodes": "n", "schednodes": "Y",
    "starttime": "S", "state": "T", "statecompact": "t", "submittime": "V", "timeleft": "L",
    "timelimit": "l", "timeused": "M", "tres-per-node": "b", "userid": "U", "username": "u",
    "workdir": "Z",
}  # fmt: skip
NAMED: dict[str, Field] = {**{n: FIELDS[k] for n, k in _BY_LETTER.items()}, **_MORE}
NAME_TIMES = frozenset(n for n, k in _BY_LETTER.items() if k in TIME_LETTERS)

__all__ = ["COMPACT", "FIELDS", "NAMED", "NAME_TIMES", "TIME_LETTERS"]
