"""The sbatch option table and the tokenizers for scripts and command lines.

Standard library only: the `podium submit` client uses this module to find the
script among its arguments without loading any server-side library.

Every option Podium knows is in OPTIONS; options that exist in sbatch but cannot be
honoured on an embedded single-node cluster are in REFUSED with the reason. Anything
else is unknown and gets a did-you-mean suggestion. Nothing is silently ignored.
"""

from __future__ import annotations

from podium.api.fields import Fields
from podium.errors import SpecError
from podium.spec.suggest import did_you_mean

TYPE_CHECKING = False  # typing itself (which loads re) is not loaded on the lean path
if TYPE_CHECKING:
    from typing import Literal

    ArgKind = Literal["none", "required", "optional"]
    Scope = Literal["any", "cli", "podium"]


class Option(Fields):
    """One sbatch-style option: its long name, short letter and argument kind.

    `scope` is "cli" for options that only make sense on the command line (they
    steer the client, like --wait, or replace the script, like --wrap), and "podium"
    for Podium's own options, which sbatch does not know (not valid in #SBATCH lines).
    """

    __slots__ = ("arg", "long", "scope", "short")

    def __init__(
        self, long: str, short: str | None = None, arg: ArgKind = "required", scope: Scope = "any"
    ) -> None:
        self.long = long
        self.short = short
        self.arg = arg
        self.scope = scope


class Given(Fields):
    """An option as the user gave it, with where it came from (for error messages)."""

    __slots__ = ("long", "value", "where")

    def __init__(self, long: str, value: str | None, where: str) -> None:
        self.long = long
        self.value = value
        self.where = where


def _table(*options: Option) -> dict[str, Option]:
    return {o.long: o for o in options}


OPTIONS: dict[str, Option] = _table(
    Option("job-name", "J"),
    Option("ntasks", "n"),
    Option("ntasks-per-node"),
    Option("ntasks-per-core"),
    Option("cpus-per-task", "c"),
    Option("cpus-per-gpu"),
    Option("mincpus"),
    Option("gpus", "G"),
    Option("gpus-per-node"),
    Option("gpus-per-task"),
    Option("gres"),
    Option("mem"),
    Option("mem-per-cpu"),
    Option("mem-per-gpu"),
    Option("time", "t"),
    Option("time-min"),
    Option("output", "o"),
    Option("error", "e"),
    Option("input", "i"),
    Option("open-mode"),
    Option("partition", "p"),
    Option("qos", "q"),
    Option("account", "A"),
    Option("chdir", "D"),
    Option("export"),
    Option("requeue", arg="none"),
    Option("no-requeue", arg="none"),
    Option("dependency", "d"),
    Option("kill-on-invalid-dep"),
    Option("array", "a"),
    Option("signal"),
    Option("exclusive", arg="optional"),
    Option("nodes", "N"),
    Option("wait-all-nodes"),
    Option("nodelist", "w"),
    Option("exclude", "x"),
    Option("constraint", "C"),
    Option("hold", "H", arg="none"),
    Option("nice", arg="optional"),
    Option("begin", "b"),
    Option("comment"),
    Option("wckey"),
    Option("cpu-bind"),
    Option("hint"),
    Option("gres-flags"),
    Option("mail-type"),
    Option("mail-user"),
    # Pyxis' container flags (enroot's semantics; docs/containers.md).
    Option("container-image"),
    Option("container-mounts"),
    Option("container-workdir"),
    Option("container-name"),
    Option("container-save"),
    Option("container-env"),
    Option("container-writable", arg="none"),
    Option("container-readonly", arg="none"),
    Option("container-mount-home", arg="none"),
    Option("no-container-mount-home", arg="none"),
    Option("container-remap-root", arg="none"),
    Option("no-container-remap-root", arg="none"),
    Option("container-entrypoint", arg="none"),
    Option("no-container-entrypoint", arg="none"),
    # Podium's own options (valid in #PODIUM lines, YAML and on the command line).
    Option("checkpoint-dir", scope="podium"),
    Option("auto-resume", scope="podium"),
    Option("requeue-exit", scope="podium"),
    Option("no-requeue-exit", scope="podium"),
    Option("heartbeat-timeout", scope="podium"),
    # Client-side options: they steer `podium submit` itself.
    Option("wrap", scope="cli"),
    Option("file", "f", scope="cli"),
    Option("json", arg="none", scope="cli"),
    Option("parsable", arg="none", scope="cli"),
    Option("wait", "W", arg="none", scope="cli"),
    Option("test-only", arg="none", scope="cli"),
    Option("dry-run", arg="none", scope="cli"),
    Option("quiet", "Q", arg="none", scope="cli"),
    Option("batch", scope="cli"),
    Option("help", "h", arg="none", scope="cli"),
)

_ONE_NODE = "the embedded cluster is a single node"
REFUSED: dict[str, str] = {
    "uid": "jobs run as the submitting user (connect as that user instead)",
    "gid": "jobs run with the submitting user's groups",
    "clusters": "the embedded cluster is one cluster (use backend: slurm for several)",
    "reservation": "the embedded cluster has no advance reservations",
    "licenses": "the embedded cluster tracks no licenses",
    "oversubscribe": "Podium never oversubscribes CPUs, GPUs or memory",
    "network": f"{_ONE_NODE}: there is no interconnect to configure",
    "switches": f"{_ONE_NODE}: there are no network switches to pick",
    "deadline": "deadlines are not enforced yet (use --time and --begin)",
    "burst-buffer": "the embedded cluster has no burst buffers",
    "bb": "the embedded cluster has no burst buffers",
    "bbf": "the embedded cluster has no burst buffers",
    "container": "OCI bundles are not supported: use --container-image (Pyxis, backend: slurm)",
    "container-id": "OCI bundles are not supported: use --container-image (Pyxis, backend: slurm)",
    "reboot": f"{_ONE_NODE}: it cannot be rebooted for one job",
    "cpu-freq": "CPU frequency control is not available on the embedded cluster",
    "gpu-freq": "GPU frequency control is not available on the embedded cluster",
    "power": "power management is not available on the embedded cluster",
    "distribution": "task distribution is not modelled: CPUs are allocated by count",
    "sockets-per-node": "CPU topology is not modelled: CPUs are allocated by count",
    "cores-per-socket": "CPU topology is not modelled: CPUs are allocated by count",
    "threads-per-core": "CPU topology is not modelled: CPUs are allocated by count",
    "core-spec": "core specialisation is not modelled: CPUs are allocated by count",
    "thread-spec": "core specialisation is not modelled: CPUs are allocated by count",
    "mem-bind": "NUMA memory binding is not done yet",
    "gpu-bind": "GPUs are bound per job through CUDA_VISIBLE_DEVICES (use --gpus-per-task)",
    "extra-node-info": "CPU topology is not modelled: CPUs are allocated by count",
    "tmp": "local scratch space is not tracked",
    "x11": "batch jobs have no X11 display",
    "get-user-env": "the environment comes from the submitting shell (see --export)",
    "export-file": "use --export with NAME=value pairs",
    "propagate": "resource limits are not propagated to jobs",
    "no-kill": f"{_ONE_NODE}: losing it always ends the job",
    "profile": "per-job profiling is not collected yet",
    "acctg-freq": "accounting is sampled by the daemon, not per job",
    "prefer": "node features are matched with --constraint",
    "cluster-constraint": "the embedded cluster is one cluster",
    "priority": "only an administrator may set a priority (use --nice or --qos)",
    "delay-boot": f"{_ONE_NODE}: it is never rebooted for a job",
    "mcs-label": "MCS labels are not supported",
    "spread-job": f"{_ONE_NODE}: a job cannot be spread",
    "use-min-nodes": f"{_ONE_NODE}: a job always uses one node",
    "resv-ports": "ports are given through MASTER_PORT",
    "ignore-pbs": "PBS directives are never read",
    "batch": "node features are matched with --constraint",
    "tres-per-task": "use --cpus-per-task and --gpus-per-task",
    "ntasks-per-gpu": "use --ntasks with --gpus-per-task",
    "ntasks-per-socket": "CPU topology is not modelled: CPUs are allocated by count",
    "sockets": "CPU topology is not modelled: CPUs are allocated by count",
}

_SHORT: dict[str, Option] = {o.short: o for o in OPTIONS.values() if o.short}


def _unknown(name: str, where: str, dashes: str) -> SpecError:
    if name in REFUSED:
        return SpecError(f"{where}: {dashes}{name} cannot be honoured: {REFUSED[name]}")
    hint = did_you_mean(name, OPTIONS, prefix="--")
    return SpecError(f"{where}: unknown option {dashes}{name}{hint}")


def parse_tokens(
    tokens: list[str], where: str, *, stop_at_positional: bool = False
) -> tuple[list[Given], list[str]]:
    """Parse option tokens into Given options.

    Returns (options, rest). With stop_at_positional, parsing stops at the first
    token that is not an option (the script path) and `rest` holds it and what
    follows; otherwise a positional token is an error. Raises SpecError naming
    `where` for an unknown, refused or malformed option.
    """
    given: list[Given] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            return given, tokens[i + 1 :]
        if tok.startswith("--") and len(tok) > 2:
            name, eq, inline = tok[2:].partition("=")
            opt = OPTIONS.get(name)
            if opt is None:
                raise _unknown(name, where, "--")
            value: str | None
            if opt.arg == "none":
                if eq:
                    raise SpecError(f"{where}: --{name} takes no value (got {tok!r})")
                value = None
            elif eq:
                value = inline
            elif opt.arg == "optional":
                value = None
            else:
                if i + 1 >= len(tokens):
                    raise SpecError(f"{where}: --{name} needs a value")
                i += 1
                value = tokens[i]
            given.append(Given(opt.long, value, where))
        elif tok.startswith("-") and len(tok) > 1 and not tok[1].isdigit():
            letter, attached = tok[1], tok[2:]
            opt = _SHORT.get(letter)
            if opt is None:
                raise SpecError(f"{where}: unknown option -{letter}")
            if opt.arg == "none":
                if attached:
                    raise SpecError(f"{where}: -{letter} takes no value (got {tok!r})")
                value = None
            elif attached:
                value = attached[1:] if attached.startswith("=") else attached
            else:
                if i + 1 >= len(tokens):
                    raise SpecError(f"{where}: -{letter} (--{opt.long}) needs a value")
                i += 1
                value = tokens[i]
            given.append(Given(opt.long, value, where))
        else:
            if stop_at_positional:
                return given, tokens[i:]
            raise SpecError(f"{where}: unexpected argument {tok!r}: expected --option[=value]")
        i += 1
    return given, []


def split_command_line(argv: list[str]) -> tuple[list[Given], str | None, list[str]]:
    """Split `podium submit` arguments into (options, script path, script args)."""
    given, rest = parse_tokens(argv, "command line", stop_at_positional=True)
    if not rest:
        return given, None, []
    return given, rest[0], rest[1:]


DIRECTIVE_PREFIXES = ("#SBATCH", "#PODIUM")


def script_directives(script: str) -> list[Given]:
    """Read the #SBATCH and #PODIUM directives of a batch script, in order.

    As in sbatch, directives are read from the top of the script until the first
    line that is neither blank nor a comment. Client-only options (--wrap, --wait,
    ...) are refused in a script. Raises SpecError naming the line.
    """
    given: list[Given] = []
    for number, line in enumerate(script.splitlines(), start=1):
        stripped = line.strip()
        if number == 1 and stripped.startswith("#!"):
            continue
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        prefix = next((p for p in DIRECTIVE_PREFIXES if line.startswith(p)), None)
        if prefix is None:
            continue
        body = line[len(prefix) :]
        if body and not body[0].isspace():
            continue  # e.g. "#SBATCHX": a comment, as in sbatch
        where = f"line {number} ({stripped[:60]})"
        try:
            import shlex  # only scripts need it: not the command line's fast path

            tokens = shlex.split(body, comments=True)
        except ValueError as exc:
            raise SpecError(f"{where}: cannot parse directive: {exc}") from None
        options, _ = parse_tokens(tokens, where)
        for opt in options:
            if OPTIONS[opt.long].scope == "cli":
                raise SpecError(f"{where}: --{opt.long} is only valid on the command line")
        ours = [o.long for o in options if OPTIONS[o.long].scope == "podium"]
        if prefix == "#SBATCH" and ours:
            raise SpecError(f"{where}: --{ours[0]} is a Podium option: write it as #PODIUM")
        given.extend(options)
    return given
