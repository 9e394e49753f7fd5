"""Slurm's `scontrol`, `sbatch` and `scancel` over Podium's Backend: the subcommands
and output forms batch scripts rely on. Errors are one line on stderr, as Slurm's
(`scontrol: error: ...`), with exit code 1.

- `scontrol show hostnames [LIST]` (default `$SLURM_JOB_NODELIST`), one name a line;
- `scontrol show job [ID]` (default `$SLURM_JOB_ID`) and `scontrol show node [NAME]`,
  as `Key=Value` lines; `scontrol show config` (podium.slurm_commands.show_config);
- `scontrol requeue|hold|release ID[,ID...]`;
- `sbatch` is `podium submit` (the same options, `--parsable` included);
- `scancel ID... [-u USER] [-n NAME] [-t STATES]`, silent as scancel is, and
  `scancel --signal=SIG [-b|-f] ID...`.
"""

from __future__ import annotations

import os
import sys

from podium.api.selection import JobFilter, Selection
from podium.errors import PodiumError
from podium.slurm_commands.args import InSlurmsWords, job_ids, job_refs, read_options

TYPE_CHECKING = False  # typing itself is not loaded: squeue and scancel run in loops
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from podium.api.backend_protocol import Backend

SCANCEL_OPTIONS = {"-u": "user", "--user": "user", "-n": "name", "--name": "name"}
SCANCEL_OPTIONS |= {"-t": "state", "--state": "state", "-s": "signal", "--signal": "signal"}
SCANCEL_FLAGS = {"-b": "batch", "--batch": "batch", "-f": "full", "--full": "full"}
SCANCEL_FLAGS |= {"-Q": "quiet", "--quiet": "quiet"}
TOOL_NAMES = "scontrol, sbatch, scancel, squeue, srun, salloc, sacct, sinfo, sprio, sshare or sstat"
USAGE = "scontrol: error: expected show hostnames|job|node|config, update, requeue, hold or release"


def main(argv: Sequence[str]) -> int:
    """Run `argv[0]` (scontrol, sbatch or scancel) with the rest of `argv`."""
    if not argv:
        print(
            "podium.slurm_commands: name a tool: scontrol, sbatch, scancel, squeue, srun or salloc",
            file=sys.stderr,
        )
        return 1
    tool, args = argv[0], list(argv[1:])
    tools: dict[str, Callable[[list[str]], int]] = {
        "scontrol": scontrol,
        "sbatch": sbatch,
        "scancel": scancel,
        "squeue": squeue,
        "salloc": salloc,
        "srun": _srun,
        "sacct": sacct,
        "sinfo": sinfo,
        "sprio": sprio,
        "sshare": sshare,
        "sstat": sstat,
    }
    run = tools.get(tool)
    if run is None:
        print(
            f"podium.slurm_commands: no tool {tool!r}: "
            "scontrol, sbatch, scancel, squeue, srun or salloc",
            file=sys.stderr,
        )
        return 1
    try:
        code = run(args)
        sys.stdout.flush()
        return code
    except (PodiumError, ValueError) as exc:
        said = str(exc)  # Slurm's own words where they carry their prefix already
        as_is = isinstance(exc, InSlurmsWords) or said.startswith("slurm_")
        print(said if as_is else f"{tool}: error: {said}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `scontrol show job | head -n 1`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _print(text: str) -> int:
    if text:
        print(text)
    return 0


def squeue(args: list[str]) -> int:
    """squeue over this cluster, fetching only the record keys its format reads."""
    from podium.slurm_commands.squeue import squeue as run

    def jobs_of(every: bool, keys: tuple[str, ...] | None) -> list[dict[str, Any]]:
        which = JobFilter(finished=every)
        backend = _backend()
        return backend.jobs(which) if keys is None else backend.jobs_table(keys, which)

    def forecast_of() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = _backend().forecast()
        return found

    return run(args, jobs_of, forecast_of)


def sacct(args: list[str]) -> int:
    """sacct over the jobs that ran and those still waiting (slurmdbd records a job at
    submit: sacct lists it PENDING), in job id order."""
    from podium.slurm_commands.sacct import sacct as run

    def jobs() -> list[dict[str, Any]]:
        backend = _backend()
        ran = backend.acct(JobFilter(finished=True))
        waiting = [dict(j, steps=[]) for j in backend.jobs(JobFilter(states=("PENDING",)))]
        return sorted(ran + waiting, key=lambda j: int(j["job_id"]))

    return _print(run(args, jobs))


def sinfo(args: list[str]) -> int:
    from podium.slurm_commands.sinfo import sinfo as run

    return _print(run(args, lambda: _backend().nodes()))


def _srun(args: list[str]) -> int:
    from podium.slurm_commands.srun_entry import srun_main

    return srun_main(args)


def salloc(args: list[str]) -> int:
    """An allocation, and the command (default: the user's shell) run in it on this
    terminal, as salloc(1); `srun` inside it starts steps there."""
    from podium.slurm_commands.attach import allocate_and_run

    return allocate_and_run("salloc", args)


def scontrol(args: list[str]) -> int:
    """The subcommands above; anything else is refused with what is known."""
    if not args:
        raise ValueError(USAGE.removeprefix("scontrol: error: "))
    verb, rest = args[0].lower(), args[1:]
    if verb == "show" and rest:
        what, names = rest[0].lower(), rest[1:]
        if what in ("hostnames", "hostname"):
            expr = names[0] if names else os.environ.get("SLURM_JOB_NODELIST", "")
            if not expr:
                raise ValueError("show hostnames needs a host list or $SLURM_JOB_NODELIST")
            from podium.api.hostlist import hostlist

            print("\n".join(hostlist(expr)))
            return 0
        if what == "config":
            from podium.slurm_commands.show_config import show_config

            return _print(show_config(_backend().ping()))
        if what in ("job", "jobid", "jobs"):
            return _print(_show().show_job(_backend(), names[0] if names else ""))
        if what == "node":
            return _print(_show().show_nodes(_backend(), names[0] if names else None))
        if what in ("partition", "partitions"):
            return _print(_show().show_partitions(_backend(), names[0] if names else None))
    if verb == "update" and rest:
        return _update(rest)
    if verb in ("requeue", "hold", "release") and rest:
        ids, tasks = job_refs(rest)
        if verb == "requeue":
            _outlive_own_job()
        _backend().control(verb, Selection(ids, tasks=tasks))  # type: ignore[arg-type]
        return 0
    raise ValueError(USAGE.removeprefix("scontrol: error: "))


def sbatch(args: list[str]) -> int:
    """`podium submit` with the same arguments."""
    from podium.cli.main import main as podium

    return int(podium(["submit", *args]) or 0)


def scancel(args: list[str]) -> int:
    """Cancel jobs by id and/or -u/-n/-t, printing nothing on success; with
    `-s/--signal SIG`, send SIG to their steps instead (`-b`: the batch shell alone,
    `-f`: every process of the job), as scancel does."""
    given, words = read_options(args, SCANCEL_OPTIONS, SCANCEL_FLAGS, "use -u, -n, -t, -s or ids")
    filters = dict(given)
    ids, tasks = job_refs(words)
    states = filters.get("state")
    if "signal" in filters:
        if not ids and not tasks:
            raise ValueError("--signal needs job ids")
        scope = "full" if "full" in filters else "batch" if "batch" in filters else "steps"
        _outlive_own_job()
        _backend().send_signal(Selection(ids, tasks=tasks), signal_number(filters["signal"]), scope)
        return 0
    selection = Selection(
        ids,
        filters.get("user"),
        filters.get("name"),
        tuple(s.strip().upper() for s in states.split(",")) if states else None,
        tasks,
    )
    _outlive_own_job()
    _backend().control("cancel", selection)
    return 0


def signal_number(text: str) -> int:
    """A signal by number, or by name with or without SIG (USR2, SIGUSR2, usr2)."""
    import signal

    word = text.strip().upper()
    if word.isdigit() and 0 < int(word) < 65:
        return int(word)
    try:
        return int(signal.Signals["SIG" + word.removeprefix("SIG")])
    except KeyError:
        raise ValueError(
            f"invalid signal {text!r}: expected a name like USR1, SIGTERM or a number 1-64"
        ) from None


def _outlive_own_job() -> None:
    """Inside a job, ignore the SIGTERM that a requeue or cancel of this very job sends
    to its processes, this one among them: the command finishes and exits 0 once its
    request is answered, as Slurm's does (its reply comes before the job is signalled).
    submitit's checkpoint handler runs `scontrol requeue $SLURM_JOB_ID` and fails the
    job when that is killed. KillWait's SIGKILL still ends a command that hangs."""
    if os.environ.get("SLURM_JOB_ID") or os.environ.get("PODIUM_JOB_ID"):
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _update(words: list[str]) -> int:
    """`scontrol update JobId=N Key=Value...`: TimeLimit=T in Slurm's forms (minutes,
    [D-]H:M:S, UNLIMITED), or +T/-T to add to or take from the current limit; Nice=V;
    Priority=0 holds the job, as in Slurm. Other keys are refused, named, with why."""
    fields: dict[str, str] = {}
    for word in words:
        key, eq, value = word.partition("=")
        if not eq:
            raise ValueError(f"update expects Key=Value words, not {word!r}")
        fields[key.lower()] = value
    job_text = fields.pop("jobid", None) or fields.pop("job", None)
    if not job_text:
        raise ValueError("update needs JobId=ID (and TimeLimit=..., Nice=... or Priority=0)")
    known = ("timelimit", "nice", "priority")
    other = next((k for k in fields if k not in known), None)
    if other is not None or not fields:
        raise ValueError(
            f"update of {other or 'nothing'} is not supported here: TimeLimit, Nice and "
            "Priority=0 are"
        )
    (job_id,) = job_ids(job_text)[:1]
    backend = _backend()
    if "priority" in fields:
        if fields["priority"].strip() != "0":
            raise ValueError(
                f"Priority={fields['priority']}: Podium computes priorities (multifactor, "
                "docs/scheduling.md), so only Priority=0 (hold) is taken; Nice=N moves a "
                "job by N (raised by its user, lowered by an administrator)"
            )
        backend.control("hold", Selection((job_id,)))
    if "nice" in fields:
        text = fields["nice"].strip()
        if not text.lstrip("+-").isdigit():
            raise ValueError(f"Nice={text!r}: give a whole number from -10000 to 10000")
        backend.set_nice(job_id, int(text))
    if "timelimit" in fields:
        backend.set_time_limit(job_id, _new_limit(backend, job_id, fields["timelimit"]))
    return 0


def _new_limit(backend: Backend, job_id: int, given: str) -> int | None:
    """The limit `TimeLimit=given` asks for: Slurm's forms, or +T/-T of the current."""
    from podium.api.timefmt import parse_duration

    text = given.strip()
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    if text[:1] in ("+", "-"):
        current = backend.job(job_id).get("time_limit_s")
        if current is None:
            raise ValueError(f"job {job_id} has no time limit to add to or take from")
        delta = parse_duration(text[1:]) or 0
        seconds = int(current + delta if text[0] == "+" else current - delta)
        if seconds < 1:
            raise ValueError(f"{text} would leave job {job_id} no time")
        return seconds
    return parse_duration(text)


def _show() -> Any:
    """scontrol's show module, loaded when asked (sbatch's path never loads it)."""
    from podium.slurm_commands import scontrol_show

    return scontrol_show


def sprio(args: list[str]) -> int:
    from podium.slurm_commands.stats_tools import sprio as run

    return _print(run(args, lambda: _backend().priorities()))


def sshare(args: list[str]) -> int:
    from podium.slurm_commands.stats_tools import sshare as run

    return _print(run(args, lambda: _backend().share()["shares"]))


def sstat(args: list[str]) -> int:
    """sstat of running jobs' steps, from their accounting records."""
    from podium.slurm_commands.stats_tools import sstat as run

    backend = _backend()

    def job_of(job_id: int) -> dict[str, Any] | None:
        found = [j for j in backend.acct(JobFilter(finished=True)) if j["job_id"] == job_id]
        return found[0] if found else None

    text, errors = run(args, job_of)
    _print(text)
    for line in errors:
        print(line, file=sys.stderr)
    return 0


def _backend() -> Backend:
    from podium.backends import open_backend

    return open_backend()


__all__ = ["main", "signal_number"]
