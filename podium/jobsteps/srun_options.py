"""srun's command line, read as srun reads it: options up to the first word that is
not one (the command), `-n4`, `-n 4`, `--ntasks=4` and `--ntasks 4` alike.

Options are sorted into those a step honours, those accepted but not applied on one
node (`ACCEPTED`, each with its reason in docs/slurm-compat.md), and those refused
with the reason. Standard library only (srun's fast path).
"""

from __future__ import annotations

# long name -> field, for options that take a value
VALUED = {
    "--ntasks": "ntasks",
    "--nodes": "nodes",
    "--ntasks-per-node": "ntasks_per_node",
    "--cpus-per-task": "cpus_per_task",
    "--gpus-per-task": "gpus_per_task",
    "--gpus": "gpus",
    "--output": "output",
    "--error": "error",
    "--input": "input",
    "--job-name": "name",
    "--chdir": "chdir",
    "--wait": "wait",
    "--kill-on-bad-exit": "kill_on_bad_exit",
    "--export": "export",
    "--open-mode": "open_mode",
}
SHORT_VALUED = {
    "-n": "--ntasks",
    "-N": "--nodes",
    "-c": "--cpus-per-task",
    "-G": "--gpus",
    "-o": "--output",
    "-e": "--error",
    "-i": "--input",
    "-J": "--job-name",
    "-D": "--chdir",
    "-W": "--wait",
    "-t": "--time",
    "-p": "--partition",
    "-A": "--account",
    "-q": "--qos",
    "-w": "--nodelist",
    "-x": "--exclude",
    "-m": "--distribution",
    "-C": "--constraint",
}
FLAGS = {
    "--label": "label",
    "--unbuffered": "unbuffered",
    "--exclusive": "exclusive",
    "--overlap": "overlap",
    "--overcommit": "overcommit",
    "--quiet": "quiet",
    "--verbose": "verbose",
    "--no-kill": "no_kill",
    "--pty": "pty",
}
SHORT_FLAGS = {
    "-l": "--label",
    "-u": "--unbuffered",
    "-O": "--overcommit",
    "-Q": "--quiet",
    "-v": "--verbose",
    "-k": "--no-kill",
    "-K": "--kill-on-bad-exit",
}
# Accepted with a value and not applied within one node's allocation (docs say why).
ACCEPTED = {
    "--mpi", "--cpu-bind", "--cpu_bind", "--distribution", "--hint", "--mem", "--mem-per-cpu",
    "--mem-per-gpu", "--gres", "--gres-flags", "--partition", "--account", "--qos", "--time",
    "--nodelist", "--exclude", "--constraint", "--propagate", "--ntasks-per-core",
    "--threads-per-core", "--gpu-bind", "--mem-bind", "--accel-bind", "--network",
    "--switches", "--gpus-per-node", "--cpus-per-gpu", "--signal", "--comment", "--jobid",
    "--time-min", "--ntasks-per-gpu",
}  # fmt: skip
ACCEPTED_FLAGS = {"--exact", "--whole", "--oversubscribe", "--no-allocate", "--spread-job"}
REFUSED = {
    "--multi-prog": "a different program per task is not supported; use $SLURM_PROCID",
    "--het-group": "heterogeneous jobs are not supported",
}


class StepOptions:
    """What one srun asked for; None means "as the job has it". (A plain class: the
    dataclasses module costs srun's start-up ~10 ms.)"""

    def __init__(self) -> None:
        self.argv: list[str] = []
        self.ntasks: int | None = None
        self.nodes: int | None = None
        self.ntasks_per_node: int | None = None
        self.cpus_per_task: int | None = None
        self.gpus_per_task: int | None = None
        self.gpus: int | None = None
        self.output: str | None = None
        self.error: str | None = None
        self.input: str | None = None
        self.name: str | None = None
        self.chdir: str | None = None
        self.wait: int | None = None
        self.kill_on_bad_exit: bool = False
        self.export: str | None = None
        self.open_mode: str = "truncate"
        self.open_mode_given = False  # else the job's (PODIUM_OPEN_MODE)
        self.label: bool = False
        self.unbuffered: bool = False
        self.exclusive: bool = False
        self.overlap: bool = False
        self.overcommit: bool = False
        self.quiet: bool = False
        self.verbose: bool = False
        self.no_kill: bool = False
        self.pty: bool = False
        self.container: dict[str, object] = {}  # Pyxis' options (podium.api.containers)
        self.accepted: list[str] = []  # accepted, not applied in a step
        self.given: list[tuple[str, str]] = []  # long name, value ("" flag)


def _count(option: str, value: str, least: int = 1) -> int:
    text = value.split(":")[-1] if option in ("--gpus", "--gpus-per-task") else value
    if not text.isascii() or not text.isdigit() or int(text) < least or int(text) > 1 << 20:
        raise ValueError(f"invalid {option} value {value!r}: expected a whole number >= {least}")
    return int(text)


def _set(opts: StepOptions, option: str, value: str) -> None:
    name = VALUED[option]
    if name in ("ntasks", "nodes", "ntasks_per_node", "cpus_per_task", "gpus_per_task"):
        setattr(opts, name, _count(option, value))
    elif name == "gpus":
        opts.gpus = _count(option, value, least=0)
    elif name == "wait":
        opts.wait = _count(option, value, least=0)
    elif name == "kill_on_bad_exit":
        opts.kill_on_bad_exit = value != "0"
    elif name == "open_mode":
        if value not in ("append", "truncate"):
            raise ValueError(f"invalid --open-mode {value!r}: expected append or truncate")
        opts.open_mode = value
        opts.open_mode_given = True
    else:
        setattr(opts, name, value)


def _next_word(args: list[str], i: int, key: str) -> tuple[int, str]:
    """The value of option `key` given as the word after it (`-n 4`), and its index."""
    if i + 1 == len(args):
        raise ValueError(f"option {key} needs a value")
    return i + 1, args[i + 1]


def _container_option(
    opts: StepOptions, key: str, eq: str, value: str, args: list[str], i: int
) -> int:
    """One of Pyxis' options into `opts.container`; the index of its last word."""
    from podium.api.containers import SWITCHES, VALUED, check_value

    name = key[2:]
    if name in SWITCHES:
        if eq:
            raise ValueError(f"option {key} takes no value")
        field, on = SWITCHES[name]
        opts.container[field] = on
    elif name in VALUED:
        if not eq:
            i, value = _next_word(args, i, key)
        try:
            opts.container[VALUED[name]] = check_value(name, value)
        except ValueError as exc:
            raise ValueError(f"invalid {key} value: {exc}") from None
    else:
        raise ValueError(f"unrecognized option {key!r} (docs/slurm-compat.md lists srun's)")
    opts.given.append((key, value))
    return i


def parse(args: list[str]) -> StepOptions:
    """The options before the command, and the command. Raises ValueError naming the
    option that is wrong or refused and why."""
    opts = StepOptions()
    i = 0
    while i < len(args):
        word = args[i]
        if word == "--":
            i += 1
            break
        if not word.startswith("-") or word == "-":
            break
        if word.startswith("--"):
            key, eq, value = word.partition("=")
        elif word[:2] in SHORT_VALUED:
            key, value = SHORT_VALUED[word[:2]], word[2:]
            eq = "=" if value else ""
        elif word[:2] in SHORT_FLAGS:
            key, value = SHORT_FLAGS[word[:2]], word[2:]
            eq = "=" if value else ""
            if key != "--kill-on-bad-exit" and value:  # bundled flags: -lu
                args = [*args[: i + 1], f"-{value}", *args[i + 1 :]]
                eq, value = "", ""
        else:
            raise ValueError(f"unrecognized option {word!r} (docs/slurm-compat.md lists srun's)")
        if key in REFUSED:
            raise ValueError(f"{key} is not supported here: {REFUSED[key]}")
        if key.startswith(("--container-", "--no-container-")):
            i = _container_option(opts, key, eq, value, args, i)
            i += 1
            continue
        if key in FLAGS or key in ACCEPTED_FLAGS:
            if eq:
                raise ValueError(f"option {key} takes no value")
            if key in FLAGS:
                setattr(opts, FLAGS[key], True)
            else:
                opts.accepted.append(key)
            opts.given.append((key, ""))
        elif key == "--kill-on-bad-exit" and not eq:
            opts.kill_on_bad_exit = True
            opts.given.append((key, ""))
        elif key in VALUED or key in ACCEPTED:
            if not eq:
                i, value = _next_word(args, i, key)
            if key in VALUED:
                _set(opts, key, value)
            else:
                opts.accepted.append(key)
            opts.given.append((key, value))
        else:
            raise ValueError(f"unrecognized option {key!r} (docs/slurm-compat.md lists srun's)")
        i += 1
    opts.argv = args[i:]
    if not opts.argv:
        raise ValueError("no command to run: srun [OPTIONS] COMMAND [ARGS...]")
    return opts
