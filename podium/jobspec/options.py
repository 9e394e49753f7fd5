"""The sbatch option table and the tokenizers for scripts and command lines.

Standard library only: the `podium submit` client uses this module to find the
script among its arguments without loading any server-side library.

Every option Podium knows is in OPTIONS; the sbatch options that only a backend's
engine can honour are also in SLURM_ONLY, and each backend's admission refuses those
it cannot, with the reason. Anything else is unknown and gets a did-you-mean
suggestion. Nothing is silently ignored.
"""

from __future__ import annotations

from podium.api.fields import Fields
from podium.api.long_options import Ambiguous, resolve_long
from podium.api.suggest import did_you_mean
from podium.errors import SpecError

TYPE_CHECKING = False  # typing itself (which loads re) is not loaded on the lean path
if TYPE_CHECKING:
    from typing import Literal, TypeAlias

    ArgKind = Literal["none", "required", "optional"]
    Scope = Literal["any", "cli", "podium", "slurm"]
    # `podium submit`'s arguments split: the options, the script's path, its arguments.
    CommandLine: TypeAlias = tuple[list["Given"], str | None, list[str]]


class Option(Fields):
    """One sbatch-style option: its long name, short letter and argument kind.

    `scope` is "cli" for options that only make sense on the command line (they
    steer the client, like --wait, or replace the script, like --wrap), and "podium"
    for Podium's own options, which sbatch does not know (not valid in #SBATCH lines),
    "slurm" for sbatch's options that only a backend's engine can honour (SLURM_ONLY).
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
    Option("elastic", scope="podium"),
    Option("resize-grace", scope="podium"),
    Option("resize-signal", scope="podium"),
    Option("spares", scope="podium"),
    Option("torchft", arg="none", scope="podium"),
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

# sbatch options Podium reads but does not interpret itself. Each backend's admission
# declares which of them it refuses, with the reason (`REFUSES`, next to its Backend's
# CANNOT table), and hands the others to its engine: the Slurm backend writes them into
# the job's #SBATCH lines; the embedded cluster refuses them all.
SLURM_ONLY: dict[str, Option] = _table(
    Option("uid", scope="slurm"),
    Option("gid", scope="slurm"),
    Option("clusters", "M", scope="slurm"),
    Option("cluster-constraint", scope="slurm"),
    Option("reservation", scope="slurm"),
    Option("licenses", "L", scope="slurm"),
    Option("oversubscribe", "s", arg="none", scope="slurm"),
    Option("network", scope="slurm"),
    Option("switches", scope="slurm"),
    Option("deadline", scope="slurm"),
    Option("burst-buffer", scope="slurm"),
    Option("bb", scope="slurm"),
    Option("bbf", scope="slurm"),
    Option("container", scope="slurm"),
    Option("container-id", scope="slurm"),
    Option("reboot", arg="none", scope="slurm"),
    Option("cpu-freq", scope="slurm"),
    Option("gpu-freq", scope="slurm"),
    Option("power", scope="slurm"),
    Option("distribution", "m", scope="slurm"),
    Option("sockets-per-node", scope="slurm"),
    Option("cores-per-socket", scope="slurm"),
    Option("threads-per-core", scope="slurm"),
    Option("core-spec", "S", scope="slurm"),
    Option("thread-spec", scope="slurm"),
    Option("mem-bind", scope="slurm"),
    Option("gpu-bind", scope="slurm"),
    Option("extra-node-info", "B", scope="slurm"),
    Option("tmp", scope="slurm"),
    Option("x11", arg="optional", scope="slurm"),
    Option("get-user-env", arg="optional", scope="slurm"),
    Option("export-file", scope="slurm"),
    Option("propagate", arg="optional", scope="slurm"),
    Option("no-kill", arg="optional", scope="slurm"),
    Option("profile", scope="slurm"),
    Option("acctg-freq", scope="slurm"),
    Option("prefer", scope="slurm"),
    Option("priority", scope="slurm"),
    Option("delay-boot", scope="slurm"),
    Option("mcs-label", scope="slurm"),
    Option("spread-job", arg="none", scope="slurm"),
    Option("use-min-nodes", arg="none", scope="slurm"),
    Option("resv-ports", arg="optional", scope="slurm"),
    Option("ignore-pbs", arg="none", scope="slurm"),
    Option("tres-per-task", scope="slurm"),
    Option("ntasks-per-gpu", scope="slurm"),
    Option("ntasks-per-socket", scope="slurm"),
    Option("sockets", scope="slurm"),
)
OPTIONS.update(SLURM_ONLY)

_SHORT: dict[str, Option] = {o.short: o for o in OPTIONS.values() if o.short}


def _unknown(name: str, where: str, dashes: str) -> SpecError:
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
            if opt is None:  # getopt_long takes any unambiguous prefix, as sbatch does
                spelled = [f"--{n}" for n in OPTIONS]
                try:
                    full = resolve_long(f"--{name}", spelled, lambda n: OPTIONS[n[2:]].long)
                except Ambiguous as exc:  # getopt's words, and the likeliest of them
                    near = [n for n in spelled if n.startswith(f"--{name}")]
                    hint = did_you_mean(f"--{name}", near)
                    raise SpecError(f"{where}: {exc}{hint}") from None
                if full is None:
                    raise _unknown(name, where, "--")
                opt = OPTIONS[full[2:]]
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


def split_command_line(argv: list[str]) -> CommandLine:
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
