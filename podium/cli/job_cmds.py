"""Job commands: show, logs, hold, release, requeue, acct (queue and cancel are on the
lean path: podium.cli.lean)."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import time
from typing import Any, Literal

import click

from podium.api.goodput_sums import GROUPINGS, goodput_rows
from podium.api.selection import JobFilter, Selection
from podium.api.states import TERMINAL_STATES
from podium.api.text import printable
from podium.backends import open_backend
from podium.cli import render
from podium.cli.lean import job_refs_of, one_job, state_list
from podium.errors import SpecError

TERMINAL = TERMINAL_STATES


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
def show(job: str, as_json: bool) -> None:
    """Show one job in full, like scontrol show job."""
    job_id, task = one_job(job)
    backend = open_backend()
    record = backend.job(job_id, task)
    if as_json:
        render.print_json(record)
        return
    shown_apart = ("script", "events", "spec", "blockers", "progress", "replacements")
    render.show_record(record, skip=lambda k: k in shown_apart)
    if record.get("progress"):
        from podium.api.progress import progress_words
        from podium.api.times import iso

        click.echo(f"progress: {progress_words(record['progress'], iso)}")
    if record.get("blockers"):
        click.echo("why it waits:")
        for b in record["blockers"]:
            click.echo(f"  {printable(b['text'])}")
    if "events" not in record:  # a backend that keeps none (Slurm)
        return
    click.echo("events:")
    for e in record["events"]:
        when = dt.datetime.fromtimestamp(e["time"]).strftime("%Y-%m-%d %H:%M:%S")
        click.echo(f"  {when} {e['kind']} {printable(_event_words(e))}".rstrip())


def _event_words(event: dict[str, Any]) -> str:
    """An event's detail as a line; a replacement (JSON) in words."""
    detail = str(event.get("detail") or "")
    if event.get("kind") != "replace" or not detail.startswith("{"):
        return detail
    try:
        told = json.loads(detail)
        ranks = ",".join(str(r) for r in told["replaced"])
        gpus = ",".join(str(g) for g in told["gpus_to"])
        was = ",".join(str(g) for g in told["gpus_from"])
        how = "warm standby" if told.get("warm") else "cold start"
        return f"rank {ranks} on spare GPU {gpus} (was GPU {was}, {how}): {told['reason']}"
    except (ValueError, KeyError, TypeError):
        return detail


@click.command()
@click.argument("job")
@click.option("--follow", "-f", is_flag=True, help="Keep printing until the job ends.")
@click.option("--err", "stderr", is_flag=True, help="The error file instead of the output.")
def logs(job: str, follow: bool, stderr: bool) -> None:
    """Print a job's output file."""
    ref = one_job(job)  # an array task's record is the array's until the task starts
    backend = open_backend()
    lines = backend.log_lines(ref[0], stderr, follow) if ref[1] is None else None
    if lines is not None:
        for line in lines:
            click.echo(line, nl=not line.endswith("\n"))
        return
    record = backend.job(*ref)
    path = record["stderr" if stderr else "stdout"]
    if path is None:
        if not follow:
            raise SpecError(f"job {job} has not started: it has no output yet ({record['reason']})")
        while path is None:
            time.sleep(0.25)
            record = backend.job(*ref)
            path = record["stderr" if stderr else "stdout"]
    position = 0
    out = sys.stdout.buffer
    while True:
        try:
            with open(path, "rb") as fh:
                fh.seek(position)
                chunk = fh.read()
        except FileNotFoundError:
            chunk = b""
            if not follow and record["state"] in TERMINAL | {"RUNNING"}:
                raise SpecError(f"{path} does not exist") from None
        except PermissionError:
            raise SpecError(f"cannot read {path}: permission denied") from None
        if chunk:
            out.write(chunk)
            out.flush()
            position += len(chunk)
        if not follow or record["state"] in TERMINAL:
            if follow and chunk:
                continue  # drain what was written just before the end
            return
        time.sleep(0.2)
        record = backend.job(*ref)


def _hold_release(jobs: tuple[str, ...], action: Literal["hold", "release"]) -> None:
    if not jobs:
        raise SpecError(f"name the jobs to {action}: podium {action} JOB...")
    ids, tasks = job_refs_of(jobs)
    backend = open_backend()
    key = "held" if action == "hold" else "released"
    done = backend.control(action, Selection(ids, tasks=tasks))
    if not done:
        raise SpecError(f"none of {', '.join(jobs)} is pending: nothing to {action}")
    click.echo(f"{key} " + " ".join(backend.named(done)))


@click.command()
@click.argument("jobs", nargs=-1)
def hold(jobs: tuple[str, ...]) -> None:
    """Hold pending jobs: they stay queued and do not start."""
    _hold_release(jobs, "hold")


@click.command()
@click.argument("jobs", nargs=-1)
def release(jobs: tuple[str, ...]) -> None:
    """Release held jobs."""
    _hold_release(jobs, "release")


@click.command()
@click.argument("jobs", nargs=-1)
def requeue(jobs: tuple[str, ...]) -> None:
    """Stop running jobs and queue them again (same id, restart count raised), like
    scontrol requeue."""
    if not jobs:
        raise SpecError("name the jobs to requeue: podium requeue JOB...")
    ids, tasks = job_refs_of(jobs)
    backend = open_backend()
    done = backend.control("requeue", Selection(ids, tasks=tasks))
    click.echo("requeued " + " ".join(backend.named(done)))


@click.command()
@click.option("--step", type=click.IntRange(0, 2**62), required=True,
              help="The training step the checkpoint holds.")  # fmt: skip
@click.option("--job", "job", default=None, help="The job (default: $PODIUM_JOB_ID, in a job).")
def checkpoint(step: int, job: str | None) -> None:
    """Say that this job finished a checkpoint at STEP: preemption and shrinking count
    its lost work from now (run it from the job, after the checkpoint is on disk)."""
    done = open_backend().checkpoint(_this_job("checkpoint", job), step)
    click.echo(f"job {done['job_id']}: checkpoint at step {done['step']} noted")


def _this_job(command: str, job: str | None) -> int:
    """The job named by --job, else the one this runs in ($PODIUM_JOB_ID)."""
    import os

    text = job or os.environ.get("PODIUM_JOB_ID") or ""
    if not text.isdigit() or int(text) < 1:
        raise SpecError(
            f"podium {command}: run it inside a job (it reads $PODIUM_JOB_ID) or name the "
            f"job with --job ID, a positive number{f' (got {text!r})' if text else ''}"
        )
    return int(text)


@click.command()
@click.argument("done", type=click.FloatRange(0, 1e15))
@click.option("--of", "total", type=click.FloatRange(0, 1e15, min_open=True), required=True,
              help="The whole work, in DONE's units (steps, samples, epochs).")  # fmt: skip
@click.option("--job", "job", default=None, help="The job (default: $PODIUM_JOB_ID, in a job).")
def progress(done: float, total: float, job: str | None) -> None:
    """Say that this job has done DONE of its work (--of TOTAL): from two reports on,
    `podium queue --start` and `podium show` expect it to end where its rate says, when
    that is before its time limit (run it from the job, e.g. every few minutes)."""
    from podium.api.progress import progress_words
    from podium.api.times import iso

    got = open_backend().progress(_this_job("progress", job), done, total)
    line = f"job {got['job_id']}: {progress_words(got, iso)}"
    end, limit = got["expected_end"], got["limit_end"]
    if end is not None and limit is not None and end > limit:
        line += f", after its time limit ({iso(limit)}): it will be stopped then"
    click.echo(line)


_RELATIVE = re.compile(r"^now-(\d+)(s|sec|seconds|m|min|minutes|h|hours|d|days)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_when(text: str | None) -> float | None:
    """--since/--until: ISO date-time, now-N(s|m|h|d), or an epoch number."""
    if text is None:
        return None
    raw = text.strip()
    if raw == "now":
        return time.time()
    match = _RELATIVE.match(raw)
    if match:
        return time.time() - int(match.group(1)) * _UNITS[match.group(2)[0]]
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(raw).timestamp()
    except ValueError:
        raise SpecError(
            f"invalid time {text!r}: expected YYYY-MM-DD[THH:MM[:SS]], now-2h or an epoch"
        ) from None


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--user", "-u", default=None)
@click.option("--state", "-s", default=None, help="Only these states (comma-separated).")
@click.option("--since", "-S", default=None, help="Jobs that ended after this time.")
@click.option("--until", "-E", default=None, help="Jobs submitted before this time.")
@click.option(
    "--goodput",
    "by",
    type=click.Choice(GROUPINGS),
    default=None,
    help="Sum by account or user: GPU-seconds charged, lost by cause, and goodput.",
)
def acct(
    as_json: bool,
    user: str | None,
    state: str | None,
    since: str | None,
    until: str | None,
    by: str | None,
) -> None:
    """Accounting: started jobs with start, end, elapsed, GPU-seconds and exit code.
    With --goodput, the share of their GPU-seconds not lost to preemptions, resizes and
    faults (work since a run's newest checkpoint), summed by account or user."""
    which = JobFilter(state_list(state), user, since=parse_when(since), until=parse_when(until))
    jobs = open_backend().acct(which)
    if by is not None:
        rows = goodput_rows(jobs, by)
        if as_json:
            render.print_json({"by": by, "goodput": rows})
        else:
            render.show_goodput(rows, by)
    elif as_json:
        render.print_json(jobs)
    else:
        render.show_acct(jobs)


__all__ = ["acct", "hold", "logs", "release", "requeue", "show"]
