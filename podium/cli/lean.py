"""The lean path of the `podium` command: submit, queue and cancel without Click.

These are the commands people call in shell loops (a new interpreter each time), so
they load only the standard library and Podium's client modules. `run` takes the
forms these commands are given: sbatch's options for submit, and for queue and
cancel the options below (`--opt VALUE`, `--opt=VALUE` or `-o VALUE`). It returns None
for anything else (help, other commands, another form), which the full Click command
then reads, so there is one set of usage messages. The Click commands
(`podium.cli.lean_cmds`) call the same functions as the lean path.
"""

from __future__ import annotations

import sys

from podium.errors import PodiumError, SpecError

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable


# option spelling -> name: flags, then options with a value
QUEUE_FLAGS = {"--json": "json", "--all": "all", "-a": "all", "--me": "me"}
QUEUE_FLAGS |= {"--array": "array", "-r": "array"}
QUEUE_VALUES = {"--user": "user", "-u": "user", "--state": "state", "-t": "state"}
QUEUE_VALUES |= {"--name": "name", "-n": "name"}
CANCEL_FLAGS = {"--json": "json"}
CANCEL_VALUES = {"--user": "user", "-u": "user", "--state": "state", "-t": "state"}
CANCEL_VALUES |= {"--name": "name", "-n": "name"}
HELP = ("--help", "-h")


def read_args(
    args: list[str], flags: dict[str, str], valued: dict[str, str]
) -> tuple[dict[str, str | bool], list[str]] | None:
    """(options by name, other words) from `args`, or None when an argument is an
    option not in `flags` or `valued` (or a valued one lacks its value)."""
    options: dict[str, str | bool] = {}
    words: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            words += args[i + 1 :]
            break
        name, eq, value = arg.partition("=")
        if arg.startswith("--") and eq:
            if name not in valued:
                return None
            options[valued[name]] = value
        elif arg in flags:
            options[flags[arg]] = True
        elif arg in valued:
            if i + 1 == len(args):
                return None
            options[valued[arg]] = args[i + 1]
            i += 1
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            words.append(arg)
        i += 1
    return options, words


def state_list(text: str | None) -> tuple[str, ...] | None:
    """--state's comma-separated states, upper-cased (None: not given)."""
    if not text:
        return None
    return tuple(s.strip().upper() for s in text.split(",") if s.strip()) or None


def job_refs_of(
    texts: tuple[str, ...] | list[str],
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Job ids and array tasks ("42_3": task 3 of array 42) from user text; raises
    SpecError on a word that is neither."""
    from podium.api.selection import job_refs

    try:
        return job_refs(texts)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def one_job(text: str) -> tuple[int, int | None]:
    """One job named by user text: (job id, None), or (array id, task) for "42_3"."""
    ids, tasks = job_refs_of([text])
    if len(ids) + len(tasks) != 1:
        raise SpecError(f"{text!r}: name one job (like 42 or 42_3)")
    return (ids[0], None) if ids else tasks[0]


def queue(
    user: str | None,
    state: str | None,
    name: str | None,
    all_: bool,
    me: bool,
    as_json: bool,
    array: bool = False,
) -> int:
    """List jobs, like squeue: a table, or with `as_json` the records, one a line. A
    pending array's tasks not yet started are one record ("12_[4-9%2]"), or with
    `array` (squeue -r) one each."""
    from podium.api.selection import JobFilter
    from podium.backends import open_backend

    backend = open_backend()
    if me:
        user = backend.ping()["you"]
    which = JobFilter(state_list(state), user, name, all_)
    if as_json and not array:
        sys.stdout.write(backend.jobs_json(which))
        return 0
    from podium.api.arrays import expanded
    from podium.cli.render import ARRAY_FIELDS, QUEUE_FIELDS, print_json, show_queue

    jobs = (
        backend.jobs(which) if as_json else backend.jobs_table(QUEUE_FIELDS + ARRAY_FIELDS, which)
    )
    if array:
        jobs = [task for job in jobs for task in expanded(job)]
    if as_json:
        print_json(jobs)
    else:
        show_queue(jobs)
    return 0


def cancel(
    jobs: tuple[str, ...] | list[str],
    user: str | None,
    name: str | None,
    state: str | None,
    as_json: bool,
) -> int:
    """Cancel jobs by id and/or filters, like scancel; say which."""
    from podium.api.selection import Selection
    from podium.backends import open_backend

    ids, tasks = job_refs_of(jobs)
    backend = open_backend()
    done = backend.control("cancel", Selection(ids, user, name, state_list(state), tasks))
    if as_json:
        from podium.cli.render import print_json

        print_json(done)
    elif not done:
        print("no job matched")
    else:
        print("cancelled " + " ".join(backend.named(done)))
    return 0


def _text(value: str | bool | None) -> str | None:
    return value if isinstance(value, str) else None


def _queue(args: list[str]) -> Callable[[], int] | None:
    read = read_args(args, QUEUE_FLAGS, QUEUE_VALUES)
    if read is None or read[1]:
        return None
    o = read[0]
    return lambda: queue(
        _text(o.get("user")),
        _text(o.get("state")),
        _text(o.get("name")),
        bool(o.get("all")),
        bool(o.get("me")),
        bool(o.get("json")),
        bool(o.get("array")),
    )


def _cancel(args: list[str]) -> Callable[[], int] | None:
    read = read_args(args, CANCEL_FLAGS, CANCEL_VALUES)
    if read is None:
        return None
    o, words = read
    return lambda: cancel(
        words,
        _text(o.get("user")),
        _text(o.get("name")),
        _text(o.get("state")),
        bool(o.get("json")),
    )


def _submit(args: list[str]) -> Callable[[], int] | None:
    from podium.cli.submit import run as submit

    return lambda: submit(args)


COMMANDS = {"submit": _submit, "queue": _queue, "cancel": _cancel}


def run(args: list[str]) -> int | None:
    """Run `podium ARGS` on the lean path and return its exit status, or None when
    it is not a form this path takes. A PodiumError is one line on stderr and its
    exit code, as on the full path."""
    reader = COMMANDS.get(args[0]) if args else None
    if reader is None or any(a in HELP for a in args[1:2]):
        return None
    try:
        command = reader(args[1:])
        if command is None:
            return None
        return command()
    except PodiumError as exc:
        print(f"podium: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("podium: aborted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141


__all__ = ["cancel", "job_refs_of", "one_job", "queue", "read_args", "run", "state_list"]
