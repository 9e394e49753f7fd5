"""A submission as the client sends it, and its options gathered from the batch
script's #SBATCH lines, then the job file, then the command line (later wins, as
with sbatch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field, ValidationInfo, field_validator

from podium.api.suggest import did_you_mean
from podium.config.validation import RequestModel
from podium.config.yaml_text import NULLS, as_flag
from podium.errors import SpecError
from podium.jobspec.job_file import JOB_FILE_KEYS, yaml_mapping
from podium.jobspec.options import OPTIONS, Given, parse_tokens, script_directives
from podium.jobspec.values import (
    MAX_ARG_BYTES,
    MAX_ARGS,
    MAX_ENV_BYTES,
    MAX_PATTERN,
    MAX_SCRIPT_BYTES,
)


class SubmitRequest(RequestModel):
    """What a client sends to submit: the raw material, parsed by the daemon.

    `idempotency_key` (made by the client) makes a retried submission return the job
    the first one created instead of a second job.
    """

    script: str | None = None
    script_path: str | None = None
    script_args: list[str] = Field(default_factory=list)
    wrap: str | None = None
    yaml_text: str | None = None
    options: list[str] = Field(default_factory=list)
    cwd: str
    environment: dict[str, str] = Field(default_factory=dict)
    umask: int | None = Field(
        default=None, ge=0, le=0o777, description="the submitter's umask (sbatch: SLURM_UMASK)"
    )
    test_only: bool = False
    idempotency_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{8,64}$")

    @field_validator("environment")
    @classmethod
    def _environment_names(cls, env: dict[str, str]) -> dict[str, str]:
        total = 0
        for name, value in env.items():
            if not name or "=" in name:
                raise ValueError(
                    f"environment variable name {name!r} must be non-empty and without '='"
                )
            size = len(name.encode(errors="replace")) + len(value.encode(errors="replace")) + 2
            if size > MAX_ARG_BYTES:
                raise ValueError(
                    f"{name[:40]} is {size} bytes: a variable may be at most {MAX_ARG_BYTES} "
                    "(the kernel's limit for exec); pass large data in a file"
                )
            total += size
        if total > MAX_ENV_BYTES:
            raise ValueError(
                f"{len(env)} variables of {total} bytes: a job's environment may be at most "
                f"{MAX_ENV_BYTES} bytes (--export=NONE or fewer variables would fit)"
            )
        return env

    @field_validator("script", "wrap", "yaml_text")
    @classmethod
    def _script_size(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is not None and len(text.encode(errors="replace")) > MAX_SCRIPT_BYTES:
            what = {"script": "the batch script", "wrap": "--wrap", "yaml_text": "the job file"}
            raise ValueError(
                f"{what[str(info.field_name)]} is {len(text.encode(errors='replace'))} bytes: at "
                f"most {MAX_SCRIPT_BYTES} (Slurm's max_script_size); keep data in files"
            )
        return text

    @field_validator("options", "script_args")
    @classmethod
    def _arguments(cls, args: list[str]) -> list[str]:
        if len(args) > MAX_ARGS:
            raise ValueError(f"{len(args)} arguments: at most {MAX_ARGS}")
        for arg in args:
            if len(arg.encode(errors="replace")) > MAX_ARG_BYTES:
                raise ValueError(
                    f"an argument of {len(arg.encode(errors='replace'))} bytes: at most "
                    f"{MAX_ARG_BYTES} (the kernel's limit for exec)"
                )
        return args

    @field_validator("cwd")
    @classmethod
    def _absolute(cls, cwd: str) -> str:
        if not cwd.startswith("/") or len(cwd) > MAX_PATTERN:
            raise ValueError(f"must be an absolute path of at most {MAX_PATTERN} characters")
        return cwd


MAX_BATCH = 10_000  # jobs in one POST /v1/jobs/batch


class BatchRequest(RequestModel):
    """Several submissions at once, accepted all together or not at all. Each job's
    `idempotency_key` and `test_only` are not used: the batch's key makes a retried
    batch return the first one's jobs."""

    jobs: list[SubmitRequest] = Field(min_length=1, max_length=MAX_BATCH)
    idempotency_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{8,64}$")


# Flags that turn another off: --no-requeue is --requeue=no, and so on.
NEGATIONS = {
    "no-requeue": "requeue",
    "container-readonly": "container-writable",
    "no-container-mount-home": "container-mount-home",
    "no-container-remap-root": "container-remap-root",
    "no-container-entrypoint": "container-entrypoint",
}


@dataclass
class Options:
    """The options of one submission as given, the last of each winning, each keeping
    where it came from (a script line, a job file key, the command line)."""

    values: dict[str, Given] = field(default_factory=dict)

    def add(self, given: list[Given]) -> None:
        for g in given:
            if g.long in NEGATIONS:  # one setting: the last of the pair wins
                g = Given(NEGATIONS[g.long], "no", g.where)
            self.values[g.long] = g

    def get(self, name: str) -> Given | None:
        return self.values.get(name)

    def named(self, *prefixes: str) -> list[Given]:
        """The options given whose names start with one of `prefixes`."""
        return [g for long, g in self.values.items() if long.startswith(prefixes)]

    def text(self, name: str) -> str | None:
        g = self.values.get(name)
        return g.value if g else None


def _yaml_options(text: str) -> tuple[list[Given], str | None, str | None, list[str]]:
    """Read a job YAML file: option keys (sbatch's long names, `_` or `-`) plus script
    (its text), command (or wrap) and args."""
    data = yaml_mapping(text)
    given: list[Given] = []
    script = command = None
    args: list[str] = []
    for key, value in data.items():
        name = str(key).replace("_", "-")
        where = f"job file key {key!r}"
        if JOB_FILE_KEYS.get(name) in ("script", "command") and not isinstance(value, str):
            raise SpecError(f"{where}: expected text (a block scalar: {key}: |)")
        if JOB_FILE_KEYS.get(name) == "script":
            script = str(value)
            if not script.startswith("#!"):
                raise SpecError(
                    f"{where}: expected the script's text starting with #! (podium submit "
                    "-f reads a script named by its path itself)"
                )
            continue
        if JOB_FILE_KEYS.get(name) == "command":
            if command is not None:
                raise SpecError(f"{where}: give 'command' or 'wrap', not both")
            command = str(value)
            continue
        if name == "args":
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise SpecError(f"{where}: expected a list of arguments, e.g. [--lr, '0.1']")
            args = list(value)
            continue
        opt = OPTIONS.get(name)
        if opt is not None and opt.scope == "cli":
            raise SpecError(
                f"{where}: --{name} steers podium submit itself: give it on the command line"
            )
        if opt is None:
            hint = did_you_mean(name, [*OPTIONS, *JOB_FILE_KEYS])
            raise SpecError(f"{where}: unknown key{hint}; keys are sbatch's long option names")
        flag = as_flag(value) if isinstance(value, str) else None
        if opt.arg == "none" or (opt.arg == "optional" and flag is not None):
            if flag is None:
                raise SpecError(f"{where}: expected true or false, not {str(value)[:40]!r}")
            if name == "requeue" and flag is False:
                given.append(Given("no-requeue", None, where))
            elif flag:
                given.append(Given(name, None, where))
            continue
        if not isinstance(value, str) or value in NULLS:
            what = "nothing" if isinstance(value, str) else "a list or mapping"
            raise SpecError(
                f"{where}: expected one value, as sbatch's --{name} takes it (e.g. "
                f"{name}: VALUE), not {what}"
            )
        given.append(Given(name, value, where))
    if script is not None and command is not None:
        raise SpecError("job file: give either 'script' or 'command', not both")
    return given, script, command, args


def gather(req: SubmitRequest) -> tuple[Options, str, list[str]]:
    """The submission's options, its batch script (a --wrap command made into one) and
    the script's arguments. Raises SpecError when there is nothing, or more than one
    thing, to run."""
    cli_given, _ = parse_tokens(req.options, "command line")
    for g in cli_given:
        if OPTIONS[g.long].scope == "cli":
            raise SpecError(f"command line: --{g.long} is handled by the client, not the daemon")
    yaml_given: list[Given] = []
    yaml_script = yaml_command = None
    yaml_args: list[str] = []
    if req.yaml_text is not None:
        yaml_given, yaml_script, yaml_command, yaml_args = _yaml_options(req.yaml_text)

    sources = [x for x in (req.script, yaml_script) if x is not None]
    commands = [x for x in (req.wrap, yaml_command) if x is not None]
    if len(sources) + len(commands) > 1:
        raise SpecError("give one of a script, --wrap or a job file's script/command, not several")
    if not sources and not commands:
        raise SpecError('nothing to run: give a batch script, --wrap "CMD" or -f job.yaml')
    if commands:
        script = f"#!/bin/sh\n{commands[0]}\n"
    else:
        script = sources[0]
        if not script.startswith("#!"):
            raise SpecError(
                "the batch script does not start with #! (e.g. #!/bin/bash) on its first line"
            )
    if "\0" in script:
        raise SpecError("the batch script contains NUL bytes: is it a binary file?")
    options = Options()
    options.add(script_directives(script))
    options.add(yaml_given)
    options.add(cli_given)
    return options, script, req.script_args or yaml_args
