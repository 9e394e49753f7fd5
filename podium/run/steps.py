"""Job steps on one node: the records `srun` keeps inside a job, and how the
supervisor reads them back (as slurmstepd reports steps to Slurm's accounting).

Standard library only: `srun` and the supervisor import it on their fast paths.

Contract:
- Each job has a step directory, JOB_DIR/steps, owned by the job's user (mode 0700)
  and named to its processes by PODIUM_STEP_DIR. Step ids are numbered from 0 in
  the order steps are created: `srun` takes the next free id by creating
  `<id>.json` exclusively, so concurrent sruns never share one.
- A step record is a JSON object (`step_record`) rewritten atomically when the step
  ends. `pgid` is the process group of the step's tasks, which the supervisor signals
  for a `--signal` without `B:`.
- The records are written by the job's own processes, so the supervisor trusts
  nothing in them: it reads them as the job's user, only regular files of bounded
  size, keeps only well-typed fields, and signals only process groups that hold one
  of the job's own processes.
"""

from __future__ import annotations

import os

from podium.api.lightjson import dumps
from podium.run.files import read_bounded

TYPE_CHECKING = False  # not `typing`'s: importing it costs srun's start-up ~5 ms
if TYPE_CHECKING:
    from typing import Any

    StepDir = str | os.PathLike[str]

STEPS_DIR = "steps"
STEP_DIR_ENV = "PODIUM_STEP_DIR"
MAX_STEPS = 10_000  # records kept per run (the oldest are kept: ids are sequential)
MAX_RECORD_BYTES = 16 << 10
MAX_ENTRIES = 4 * MAX_STEPS  # directory entries looked at (other files are the job's)
MAX_READ_BYTES = 8 << 20  # read per call, over all records
STEP_STATES = frozenset(
    {"RUNNING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL"}
    | {"OUT_OF_MEMORY"}
)


def step_record(
    step_id: int,
    *,
    name: str,
    ntasks: int,
    node: str,
    gpus: list[int],
    pgid: int | None,
    start: float,
    state: str = "RUNNING",
    exit_code: int | None = None,
    signal_num: int | None = None,
    end: float | None = None,
    pids: list[int] | None = None,
) -> dict[str, Any]:
    """The JSON of one step, as `srun` writes it (`pids`: its tasks' by rank)."""
    return {
        "pids": pids or [],
        "step_id": step_id,
        "name": name,
        "ntasks": ntasks,
        "node": node,
        "gpus": gpus,
        "pgid": pgid,
        "start_time": start,
        "end_time": end,
        "state": state,
        "exit_code": exit_code,
        "signal": signal_num,
    }


def create_step(step_dir: StepDir, record: dict[str, Any]) -> int:
    """Take the next free step id in `step_dir` for `record` (its step_id is set);
    return the id. Raises OSError when the directory cannot be written."""
    taken = [int(n[:-5]) for n in os.listdir(step_dir) if n.endswith(".json") and n[:-5].isdigit()]
    step_id = max(taken, default=-1) + 1
    while True:
        path = os.path.join(step_dir, f"{step_id}.json")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            step_id += 1
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(dumps(dict(record, step_id=step_id)))
        return step_id


def update_step(step_dir: StepDir, record: dict[str, Any]) -> None:
    """Replace the step's record atomically (a reader sees the old or the new one)."""
    path = os.path.join(step_dir, f"{record['step_id']}.json")
    tmp = os.path.join(step_dir, f".{record['step_id']}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(dumps(record))
    os.replace(tmp, path)


def _read_bounded(path: str) -> bytes | None:
    """The file's bytes if it is a regular file (never through a link, never blocking
    on a FIFO) no larger than MAX_RECORD_BYTES."""
    return read_bounded(path, MAX_RECORD_BYTES)


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def clean_record(step_id: int, raw: Any) -> dict[str, Any] | None:
    """The well-typed fields of a step record read from the job's files, or None."""
    if not isinstance(raw, dict):
        return None
    state = raw.get("state")
    name = raw.get("name")
    gpus = raw.get("gpus")
    pids = raw.get("pids")
    return step_record(
        step_id,
        name=name[:200] if isinstance(name, str) else "",
        ntasks=max(0, _number(raw.get("ntasks"), int) or 0),
        node=str(raw.get("node"))[:200] if isinstance(raw.get("node"), str) else "",
        gpus=[g for g in gpus[:64] if isinstance(g, int)] if isinstance(gpus, list) else [],
        pgid=_number(raw.get("pgid"), int),
        start=_number(raw.get("start_time"), float) or 0.0,
        state=state if state in STEP_STATES else "FAILED",
        exit_code=_number(raw.get("exit_code"), int),
        signal_num=_number(raw.get("signal"), int),
        end=_number(raw.get("end_time"), float),
        pids=[p for p in pids[:4096] if type(p) is int]
        if isinstance(pids := raw.get("pids"), list)
        else [],
    )


def read_steps(step_dir: StepDir) -> list[dict[str, Any]]:
    """The steps recorded in `step_dir`, by id; unreadable or malformed records are
    skipped. A job's files are its own to fill, so the cost is bounded whatever they
    hold: at most MAX_ENTRIES directory entries looked at, MAX_STEPS records and
    MAX_READ_BYTES read (the daemon reads a running job's steps for `podium acct`)."""
    ids = []
    try:
        with os.scandir(step_dir) as entries:
            for seen, entry in enumerate(entries):
                if seen >= MAX_ENTRIES:
                    break
                name = entry.name
                if name.endswith(".json") and name[:-5].isdigit() and len(name) < 16:
                    ids.append(int(name[:-5]))
    except OSError:
        return []
    import json  # the supervisor's and daemon's side: not on srun's path

    steps = []
    budget = MAX_READ_BYTES
    for step_id in sorted(ids)[:MAX_STEPS]:
        data = _read_bounded(os.path.join(step_dir, f"{step_id}.json"))
        if data is None:
            continue
        budget -= len(data)
        if budget < 0:
            break
        try:
            record = clean_record(step_id, json.loads(data))
        except ValueError:
            continue
        if record is not None:
            steps.append(record)
    return steps


def stopped_state(job_state: str) -> str:
    """The state of a step the job's own stop ended (Slurm's sacct shows steps of a
    cancelled, timed-out or preempted job CANCELLED; a failed node fails them)."""
    return "NODE_FAIL" if job_state == "NODE_FAIL" else "CANCELLED"


def finish_running(
    steps: list[dict[str, Any]], job_state: str, end: float, stopped_at: float | None
) -> list[dict[str, Any]]:
    """The steps as the job ended `job_state` at `end`: those still RUNNING, and those
    that failed once the supervisor began stopping the job (`stopped_at`), were
    ended by that stop."""
    final = stopped_state(job_state)
    out = []
    for s in steps:
        if s["state"] == "RUNNING":
            s = dict(s, state=final, end_time=end)
        elif (
            stopped_at is not None
            and s["state"] != "COMPLETED"
            and (s["end_time"] or end) >= stopped_at
        ):
            s = dict(s, state=final)
        out.append(s)
    return out


def running_step_pids(steps: list[dict[str, Any]]) -> dict[int, int]:
    """rank -> pid of the tasks of the last running step that recorded them, as its
    srun wrote them (the job's own claim: check a pid is the job's before acting on
    it); empty when no running step did."""
    running = [s for s in steps if s["state"] == "RUNNING" and s["pids"]]
    return dict(enumerate(running[-1]["pids"])) if running else {}


def signal_steps(steps: list[dict[str, Any]], sig: int, members: set[int]) -> int:
    """Send `sig` to the process group of every running step that holds one of the
    job's `members`; return how many groups were signalled."""
    own = os.getpgrp()
    groups: set[int] = set()
    for pid in members:
        try:
            groups.add(os.getpgid(pid))
        except OSError:
            continue
    count = 0
    for step in steps:
        pgid = step["pgid"]
        if step["state"] != "RUNNING" or pgid is None or pgid == own or pgid not in groups:
            continue
        try:
            os.killpg(pgid, sig)
            count += 1
        except (ProcessLookupError, PermissionError):
            pass
    return count
