"""`podium submit`: sbatch's interface, on the lean path (standard library only: no
Click, pydantic or YAML; see podium.cli.main)."""

from __future__ import annotations

import os
import sys
import time

from podium.backends import open_backend
from podium.errors import SpecError
from podium.jobspec.options import OPTIONS, Given, split_command_line

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from typing import Any

    from podium.api.backend_protocol import Backend
    from podium.jobspec.options import CommandLine


def _token(g: Given) -> str:
    return f"--{g.long}" if g.value is None else f"--{g.long}={g.value}"


def _umask() -> int:
    """This process's umask (sent with the job, as sbatch sends SLURM_UMASK)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def build_request(
    args: list[str] | CommandLine, stdin_script: str | None = None
) -> tuple[dict[str, Any], dict[str, Given]]:
    """Turn `podium submit` arguments (or the CommandLine split from them) into the
    API request and the client-side options."""
    given, script_path, script_args = split_command_line(args) if isinstance(args, list) else args
    client_opts = {g.long: g for g in given if OPTIONS[g.long].scope == "cli"}
    tokens = [_token(g) for g in given if OPTIONS[g.long].scope != "cli"]
    request: dict[str, Any] = {
        "options": tokens,
        "cwd": os.getcwd(),
        "environment": {k: v for k, v in os.environ.items() if k != "PODIUM_TOKEN"},
        "script_args": script_args,
        "umask": _umask(),
        "idempotency_key": os.urandom(18).hex(),
        "test_only": "test-only" in client_opts,
    }
    if "wrap" in client_opts:
        if script_path is not None:
            raise SpecError(f"give either a script ({script_path}) or --wrap, not both")
        request["wrap"] = client_opts["wrap"].value
    if "file" in client_opts:
        path = str(client_opts["file"].value)
        try:
            with open(path) as fh:
                request["yaml_text"] = fh.read()
        except OSError as exc:
            raise SpecError(f"cannot read job file {path}: {exc.strerror}") from None
        _script_named_by(request, path)
    if script_path is not None:
        try:
            with open(script_path, encoding="utf-8", errors="strict") as fh:
                request["script"] = fh.read()
        except UnicodeDecodeError:
            raise SpecError(f"{script_path} is not a text batch script") from None
        except OSError as exc:
            raise SpecError(f"cannot read batch script {script_path}: {exc.strerror}") from None
        request["script_path"] = script_path
    elif "wrap" not in client_opts and "file" not in client_opts and stdin_script is not None:
        request["script"] = stdin_script
    return request, client_opts


def _script_named_by(request: dict[str, Any], job_file: str) -> None:
    """When the job file's `script:` names a file (one line, no #!), read it here, as
    the user, from the job file's directory: the request then carries the script and
    the job file the rest. A script given as text stays in the job file."""
    from podium.jobspec.job_file import job_file_script_path

    named = job_file_script_path(request["yaml_text"])
    if named is None:
        return
    key, value, rest = named
    script_path = os.path.join(os.path.dirname(os.path.abspath(job_file)), value)
    try:
        with open(script_path, encoding="utf-8", errors="strict") as fh:
            request["script"] = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not a text file"
        raise SpecError(
            f"job file key {key!r}: cannot read the script {script_path}: {why} (give a "
            "path, relative to the job file, or the script's text starting with #!)"
        ) from None
    request["script_path"] = script_path
    request["yaml_text"] = rest


def batch_requests(command: CommandLine, path: str) -> list[dict[str, Any]]:
    """The requests of `--batch FILE`: one job per line of FILE, its `podium submit`
    arguments (shell-quoted; blank lines and # comments skipped) after the options
    given on the command line (`command`), which apply to every job."""
    import shlex

    given, script_path, _ = command
    if script_path is not None:
        raise SpecError(f"give either a script ({script_path}) or --batch FILE, not both")
    common = [_token(g) for g in given if g.long != "batch"]
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise SpecError(f"cannot read the batch file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path} is not a text file of job lines") from None
    requests = []
    for number, line in enumerate(lines, 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise SpecError(f"{path}, line {number}: {exc}") from None
        if not words:
            continue
        request, _ = build_request([*common, *words])
        if "script" not in request and "wrap" not in request and "yaml_text" not in request:
            raise SpecError(f'{path}, line {number}: nothing to run: a script or --wrap "CMD"')
        requests.append(request)
    if not requests:
        raise SpecError(f"{path} names no job: one `podium submit` argument list per line")
    return requests


def run(argv: list[str]) -> int:
    """`podium submit ARGV`: submit, print as sbatch prints, and return the exit status
    (with --wait, the job's). PodiumError propagates to the caller."""
    line = split_command_line(argv)  # once: every step below reads this split
    given, script_path, _ = line
    if any(g.long == "help" for g in given):
        from podium.cli.submit_help import submit_help

        sys.stdout.write(submit_help())
        return 0
    batch = next((g.value for g in given if g.long == "batch"), None)
    if batch is not None:
        return _run_batch(line, str(batch), {g.long for g in given})
    stdin_script = None
    named = script_path is not None or any(g.long in ("wrap", "file") for g in given)
    if not named and not sys.stdin.isatty():
        stdin_script = sys.stdin.read() or None  # empty stdin: nothing was given
    request, opts = build_request(line, stdin_script)
    if "script" not in request and "wrap" not in request and "yaml_text" not in request:
        raise SpecError('nothing to run: give a batch script, --wrap "CMD" or -f job.yaml')
    backend = open_backend()
    if "dry-run" in opts:
        sys.stdout.write(backend.dry_run(request))
        return 0
    jobs = backend.submit(request)
    for warning in backend.warnings:
        print(f"podium: warning: {warning}", file=sys.stderr)
    first = jobs[0]
    if request["test_only"]:
        if "json" in opts:
            import json

            print(json.dumps(first, indent=2))
        else:
            print(
                f"Job would be queued: {first['gpus']} GPUs, {first['cpus']} CPUs, "
                f"{first['mem_mb']} MiB in partition {first['partition']} (QoS {first['qos']})"
            )
        return 0
    job_id = first["array_job_id"] or first["job_id"]
    if "json" in opts:
        import json

        print(json.dumps(jobs if len(jobs) > 1 else first, indent=2))
    elif "parsable" in opts:
        print(job_id)
    elif "quiet" not in opts:
        print(f"Submitted batch job {job_id}")
    if "wait" in opts:
        sys.stdout.flush()
        return _wait(backend, [j["job_id"] for j in jobs])
    return 0


def _run_batch(line: CommandLine, path: str, flags: set[str]) -> int:
    """Submit every job of a batch file at once (all or none); print as sbatch would
    for each, and wait for them all with --wait."""
    requests = batch_requests(line, path)
    backend = open_backend()
    groups = backend.submit_batch(requests, os.urandom(18).hex())
    if "json" in flags:
        import json

        print(json.dumps({"job_ids": groups}))
    elif "parsable" in flags:
        print("\n".join(str(ids[0]) for ids in groups))
    elif "quiet" not in flags:
        print("\n".join(f"Submitted batch job {ids[0]}" for ids in groups))
    if "wait" in flags:
        sys.stdout.flush()
        return _wait(backend, [i for ids in groups for i in ids])
    return 0


def _wait(backend: Backend, job_ids: list[int]) -> int:
    """Block until every job has ended, an array's every task included; return the
    highest exit code (1 for a job that did not complete with none)."""
    from podium.api.selection import JobFilter
    from podium.api.states import TERMINAL_STATES

    fields = ("job_id", "array_job_id", "state", "exit_code")
    ended: list[dict[str, Any]] = []
    for job_id in job_ids:
        while True:
            job = backend.job(job_id)
            if job["state"] in TERMINAL_STATES:
                break
            time.sleep(0.25)
        if job["array_job_id"] != job_id:
            ended.append(job)
            continue
        while any(  # an array: its tasks not yet ended have records of their own
            j["array_job_id"] == job_id for j in backend.jobs_table(fields, JobFilter())
        ):
            time.sleep(0.25)
        every = backend.jobs_table(fields, JobFilter(finished=True))
        ended += [j for j in every if j["array_job_id"] == job_id]
    worst = 0
    for job in ended:
        code = job["exit_code"]
        if job["state"] != "COMPLETED":
            code = code or 1
        worst = max(worst, code or 0)
    return worst
