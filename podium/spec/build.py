"""Build a JobSpec from a submission: script directives, then YAML, then command line.

Later sources override earlier ones, as with sbatch. Every value is checked against
the cluster config; anything Podium cannot honour raises SpecError naming where the
option came from, and a job that can never fit raises Unsatisfiable.
"""

from __future__ import annotations

import os
import re
import signal as signals
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import Field, field_validator

from podium.api.caller import Caller
from podium.errors import SpecError, Unsatisfiable
from podium.spec.cluster import ClusterConfig, Partition
from podium.spec.job import ArraySpec, Dependency, DependencyKind, JobSpec, SignalSpec
from podium.spec.options import OPTIONS, Given, parse_tokens, script_directives
from podium.spec.suggest import did_you_mean
from podium.spec.timefmt import parse_begin, parse_duration, parse_memory_mb
from podium.spec.validation import RequestModel

MAX_COUNT = 2**31 - 1  # the most of anything a job may ask for (tasks, CPUs, GPUs)
MAX_JOB_ID = 2**32 - 2  # job ids are 32-bit, as in Slurm
MAX_PATTERN = 4096  # PATH_MAX: the longest output pattern or directory
MAX_PAD = 10  # the widest zero-padding of a pattern (%10j)
_DIGITS_RE = re.compile(r"[0-9]+")


def _is_digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also admits '²', which int() refuses."""
    return _DIGITS_RE.fullmatch(text) is not None


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
        for name in env:
            if not name or "=" in name:
                raise ValueError(
                    f"environment variable name {name!r} must be non-empty and without '='"
                )
        return env

    @field_validator("cwd")
    @classmethod
    def _absolute(cls, cwd: str) -> str:
        if not cwd.startswith("/") or len(cwd) > MAX_PATTERN:
            raise ValueError(f"must be an absolute path of at most {MAX_PATTERN} characters")
        return cwd


@dataclass
class _Raw:
    """Options as given, last one wins, keeping where each came from."""

    values: dict[str, Given] = field(default_factory=dict)

    def add(self, given: list[Given]) -> None:
        for g in given:
            if g.long == "no-requeue":  # one setting: the last of the pair wins
                g = Given("requeue", "no", g.where)
            self.values[g.long] = g

    def get(self, name: str) -> Given | None:
        return self.values.get(name)

    def text(self, name: str) -> str | None:
        g = self.values.get(name)
        return g.value if g else None


def _err(g: Given, message: str) -> SpecError:
    return SpecError(f"{g.where}: --{g.long}: {message}")


def _positive_int(g: Given, minimum: int = 1) -> int:
    try:
        value = int(str(g.value))
    except ValueError:
        raise _err(g, f"expected an integer, got {g.value!r}") from None
    if value < minimum:
        raise _err(g, f"must be at least {minimum}, got {value}")
    if value > MAX_COUNT:
        raise _err(g, f"must be at most {MAX_COUNT}, got {value}")
    return value


_GPU_COUNT_RE = re.compile(r"^(?:([A-Za-z0-9_.-]+):)?(\d+)$")


def _gpu_count(g: Given) -> tuple[str | None, int]:
    match = _GPU_COUNT_RE.match(str(g.value))
    if not match:
        raise _err(g, f"expected [type:]count, got {g.value!r}")
    return match.group(1), _bounded_count(g, int(match.group(2)))


def _bounded_count(g: Given, count: int) -> int:
    if count > MAX_COUNT:
        raise _err(g, f"asks for {count}: at most {MAX_COUNT}")
    return count


def _gres(g: Given) -> tuple[str | None, int]:
    gpu_type: str | None = None
    count = 0
    for item in str(g.value).split(","):
        parts = item.split(":")
        if parts[0] != "gpu":
            raise _err(g, f"unknown generic resource {parts[0]!r}: this cluster has only 'gpu'")
        if len(parts) == 1:
            n = 1
        elif len(parts) == 2:
            if _is_digits(parts[1]):
                n = int(parts[1])
            else:
                gpu_type, n = parts[1], 1
        elif len(parts) == 3 and _is_digits(parts[2]):
            gpu_type, n = parts[1], int(parts[2])
        else:
            raise _err(g, f"expected gpu[:type][:count], got {item!r}")
        count += _bounded_count(g, n)
    return gpu_type, _bounded_count(g, count)


def _signal_number(text: str, g: Given) -> int:
    if _is_digits(text):
        num = int(text)
        if not 1 <= num < signals.NSIG:
            raise _err(g, f"signal number {num} out of range")
        return num
    name = text.upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise _err(g, f"unknown signal {text!r} (e.g. USR1, TERM, 10)") from None


def _signal(g: Given) -> SignalSpec:
    text = str(g.value)
    batch_only = False
    if ":" in text:
        flag, text = text.split(":", 1)
        if flag == "B":
            batch_only = True
        elif flag == "R":
            raise _err(g, "the R flag is for reservations, which the embedded cluster lacks")
        else:
            raise _err(g, f"expected [B:]signal[@seconds], got {g.value!r}")
    seconds = 60
    if "@" in text:
        text, when = text.split("@", 1)
        if not _is_digits(when) or not 0 <= int(when) <= 65535:
            raise _err(g, f"expected seconds after '@', got {when!r}")
        seconds = int(when)
    return SignalSpec(signum=_signal_number(text, g), seconds_before=seconds, batch_only=batch_only)


def _array(g: Given, max_size: int) -> ArraySpec:
    """--array: indices must be below `max_size` (Slurm's MaxArraySize), and so must
    their number. Sizes are checked per range in constant time before anything is
    expanded, so no request can make the daemon build a huge list."""
    text = str(g.value)
    throttle: int | None = None
    if "%" in text:
        text, limit = text.rsplit("%", 1)
        if not _is_digits(limit) or not 1 <= int(limit) <= MAX_COUNT:
            raise _err(g, f"the throttle after '%' must be a positive integer, got {limit!r}")
        throttle = int(limit)
    ranges: list[range] = []
    for part in text.split(","):
        match = re.match(r"^([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?$", part)
        if not match:
            raise _err(g, f"expected indices like 0-15, 1,3,5 or 0-15:4%2, got {part!r}")
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) else start
        step = int(match.group(3)) if match.group(3) else 1
        if stop < start or step < 1:
            raise _err(g, f"empty or backwards range {part!r}")
        if stop >= max_size:
            raise _err(
                g, f"index {stop} is too large: indices must be below MaxArraySize={max_size}"
            )
        ranges.append(range(start, stop + 1, step))
    if sum(len(r) for r in ranges) > max_size:  # len(range) is O(1)
        raise _err(g, f"an array may have at most {max_size} tasks (MaxArraySize)")
    indices: set[int] = set()
    for r in ranges:
        indices.update(r)
    return ArraySpec(indices=tuple(sorted(indices)), throttle=throttle)


_DEP_KINDS: tuple[DependencyKind, ...] = ("after", "afterok", "afternotok", "afterany")


def _dependencies(g: Given) -> tuple[tuple[Dependency, ...], bool]:
    text = str(g.value)
    if "," in text and "?" in text:
        raise _err(g, "use either ',' (all) or '?' (any) between clauses, not both")
    any_mode = "?" in text
    clauses: list[Dependency] = []
    for clause in re.split(r"[,?]", text):
        if clause == "singleton":
            clauses.append(Dependency(kind="singleton"))
            continue
        kind, _, ids = clause.partition(":")
        if kind not in _DEP_KINDS:
            hint = did_you_mean(kind, [*_DEP_KINDS, "singleton"])
            raise _err(g, f"unknown dependency type {kind!r}{hint}")
        job_ids: list[int] = []
        for jid in ids.split(":") if ids else []:
            if "+" in jid:
                raise _err(g, "time offsets (+minutes) in dependencies are not supported")
            base = jid.split("_", 1)[0]
            if not _is_digits(base) or not 1 <= int(base) <= MAX_JOB_ID:
                raise _err(g, f"expected job ids (1-{MAX_JOB_ID}) after {kind}:, got {jid!r}")
            job_ids.append(int(base))
        if not job_ids:
            raise _err(g, f"{kind} needs at least one job id ({kind}:123)")
        clauses.append(Dependency(kind=kind, job_ids=tuple(job_ids)))
    return tuple(clauses), any_mode


_PATTERN_RE = re.compile(r"%(\d*)(.)")
_PATTERN_LETTERS = "%AajNntux"


def _check_pattern(g: Given) -> str:
    """An output pattern: known letters only, padding of at most MAX_PAD digits, and no
    longer than a path may be."""
    text = str(g.value)
    if len(text) > MAX_PATTERN:
        raise _err(g, f"a file name pattern may be at most {MAX_PATTERN} characters")
    for match in _PATTERN_RE.finditer(text):
        if match.group(1) and int(match.group(1)) > MAX_PAD:
            raise _err(g, f"zero-padding %{match.group(1)}{match.group(2)}: at most {MAX_PAD}")
        if match.group(2) not in _PATTERN_LETTERS:
            raise _err(
                g,
                f"unknown pattern %{match.group(2)}: expected %%, %A, %a, %j, %N, %n, %t, %u, %x",
            )
    return text


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MINIMAL_ENV = ("HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM")


def _environment(g: Given | None, submitted: dict[str, str]) -> dict[str, str]:
    """Resolve --export into the job's base environment (like sbatch at submit time)."""
    if g is None:
        return dict(submitted)
    text = str(g.value)
    items = [i for i in text.split(",") if i]
    inherit = False
    env: dict[str, str] = {}
    if items and items[0].upper() in ("ALL", "NONE", "NIL"):
        inherit = items[0].upper() == "ALL"
        items = items[1:]
    elif not items:
        raise _err(g, "expected ALL, NONE or NAME[=value] list")
    if inherit:
        env.update(submitted)
    else:
        env.update({k: submitted[k] for k in _MINIMAL_ENV if k in submitted})
    for item in items:
        name, eq, value = item.partition("=")
        if not _ENV_NAME_RE.match(name):
            raise _err(g, f"{name!r} is not a valid environment variable name")
        if eq:
            env[name] = value
        elif name in submitted:
            env[name] = submitted[name]
    return env


def _yaml_options(text: str) -> tuple[list[Given], str | None, str | None, list[str]]:
    """Read a job YAML file: option keys plus script/command/args."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"job file: not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise SpecError("job file: expected a mapping of option names to values")
    given: list[Given] = []
    script = command = None
    args: list[str] = []
    extra_keys = {"script", "command", "args"}
    for key, value in data.items():
        name = str(key).replace("_", "-")
        where = f"job file key {key!r}"
        if name == "script":
            script = str(value)
            continue
        if name == "command":
            command = str(value)
            continue
        if name == "args":
            if not isinstance(value, list):
                raise SpecError(f"{where}: expected a list of arguments")
            args = [str(a) for a in value]
            continue
        opt = OPTIONS.get(name)
        if opt is None or opt.scope == "cli":
            hint = did_you_mean(
                name, [o for o in OPTIONS if OPTIONS[o].scope != "cli"] + sorted(extra_keys)
            )
            raise SpecError(f"{where}: unknown key{hint}")
        if opt.arg == "none" or (opt.arg == "optional" and isinstance(value, bool)):
            if not isinstance(value, bool):
                raise SpecError(f"{where}: expected true or false")
            if name == "requeue" and value is False:
                given.append(Given("no-requeue", None, where))
            elif value:
                given.append(Given(name, None, where))
            continue
        if isinstance(value, list | dict) or value is None:
            raise SpecError(f"{where}: expected a single value")
        given.append(Given(name, str(value), where))
    if script is not None and command is not None:
        raise SpecError("job file: give either 'script' or 'command', not both")
    return given, script, command, args


@dataclass
class Built:
    """The result of building: the spec and what only the daemon can check.

    `enter_dirs` and `write_dirs` are the directories the job's user must be able to
    enter (--chdir) and write (output directories named in the patterns): the caller
    checks them as that user (`podium.run.identity.check_dirs_as_user`), never as root.
    """

    spec: JobSpec
    dependency_where: str | None = None
    enter_dirs: tuple[str, ...] = ()
    write_dirs: tuple[str, ...] = ()


def build_job(req: SubmitRequest, config: ClusterConfig, who: Caller, now: float) -> Built:
    """Build and validate the JobSpec for `req`; raise SpecError or Unsatisfiable."""
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

    raw = _Raw()
    raw.add(script_directives(script))
    raw.add(yaml_given)
    raw.add(cli_given)
    spec = _resolve(raw, req, config, who, now, script, req.script_args or yaml_args)
    dep = raw.get("dependency")
    return Built(
        spec=spec,
        dependency_where=dep.where if dep else None,
        enter_dirs=(spec.work_dir,) if raw.get("chdir") is not None else (),
        write_dirs=_output_dirs(spec),
    )


def _output_dirs(spec: JobSpec) -> tuple[str, ...]:
    """Directories the output patterns name explicitly (no pattern letters in them)."""
    found: list[str] = []
    for pattern in (spec.output, spec.error):
        if pattern is None or "/" not in pattern:
            continue
        directory = os.path.dirname(os.path.join(spec.work_dir, pattern))
        if "%" not in directory and directory not in found:
            found.append(directory)
    return tuple(found)


def _resolve(
    raw: _Raw,
    req: SubmitRequest,
    config: ClusterConfig,
    who: Caller,
    now: float,
    script: str,
    script_args: list[str],
) -> JobSpec:
    node = config.node
    slurm = config.backend == "slurm"  # Slurm owns nodes, partitions, QoS and accounts
    out: dict[str, Any] = {"script": script, "script_args": tuple(script_args)}

    # Name and directories.
    if (g := raw.get("job-name")) is not None:
        if not g.value or "\n" in g.value:
            raise _err(g, "a job name must be one non-empty line")
        if len(g.value) > 1024:
            raise _err(g, "a job name may be at most 1024 characters")
        out["name"] = g.value
    elif req.script_path:
        out["name"] = os.path.basename(req.script_path)
    else:
        out["name"] = "wrap"
    if not os.path.isabs(req.cwd):
        raise SpecError(f"the submit directory must be absolute, got {req.cwd!r}")
    out["submit_dir"] = req.cwd
    work_dir = req.cwd
    if (g := raw.get("chdir")) is not None:
        if not g.value or len(g.value) > MAX_PATTERN:
            raise _err(g, f"needs a directory (at most {MAX_PATTERN} characters)")
        work_dir = os.path.normpath(os.path.join(req.cwd, str(g.value)))
    out["work_dir"] = work_dir
    out["umask"] = req.umask if req.umask is not None else 0o022

    # Nodes: one node only on the embedded cluster, said plainly; any count on Slurm.
    nodes = 1
    if (g := raw.get("nodes")) is not None:
        match = re.match(r"^(\d+)(?:-(\d+))?$", str(g.value))
        if not match:
            raise _err(g, f"expected N or MIN-MAX, got {g.value!r}")
        nodes = int(match.group(1))
        if nodes < 1:
            raise _err(g, "needs at least 1 node")
        if slurm and match.group(2) is not None and match.group(2) != match.group(1):
            raise _err(g, "a node range is not supported: give one count (e.g. --nodes=2)")
        if nodes != 1 and not slurm:
            raise Unsatisfiable(
                f"{g.where}: --nodes={g.value}: the embedded cluster has 1 node "
                "(use backend: slurm for multi-node jobs)"
            )
    if (g := raw.get("wait-all-nodes")) is not None and g.value not in ("0", "1"):
        raise _err(g, f"expected 0 or 1, got {g.value!r}")
    out["nodes"] = nodes
    if slurm:
        for name in ("nodelist", "exclude"):
            if (g := raw.get(name)) is not None:
                names = [n for n in str(g.value).split(",") if n]
                bad = [n for n in names if not re.match(r"^[A-Za-z0-9_.\[\]-]+$", n)]
                if not names or bad:
                    raise _err(g, f"expected node names like node1,node[2-4], got {g.value!r}")
                out[name] = tuple(names)
    elif (g := raw.get("nodelist")) is not None:
        names = [n for n in str(g.value).split(",") if n]
        if names != [node.name] and set(names) != {node.name}:
            raise Unsatisfiable(f"{g.where}: --nodelist={g.value}: the only node is {node.name!r}")
    if not slurm and (g := raw.get("exclude")) is not None and node.name in str(g.value).split(","):
        raise Unsatisfiable(f"{g.where}: --exclude={g.value} excludes the only node {node.name!r}")
    if slurm and (g := raw.get("constraint")) is not None:
        if not re.match(r"^[A-Za-z0-9_.&|,()\[\]*-]+$", str(g.value)):
            raise _err(g, f"expected features joined with & or |, got {g.value!r}")
        out["constraint"] = str(g.value)
    elif (g := raw.get("constraint")) is not None:
        wanted = [f for f in re.split(r"[&,]", str(g.value)) if f]
        if "|" in str(g.value) or "[" in str(g.value):
            raise _err(g, "only features joined with '&' are supported")
        missing = [f for f in wanted if f not in node.features]
        if missing:
            raise Unsatisfiable(
                f"{g.where}: --constraint: node {node.name} lacks feature(s) {missing} "
                f"(it has {node.features or 'none'})"
            )
        out["constraint"] = str(g.value)

    # Tasks and CPUs.
    ntasks = _positive_int(g) if (g := raw.get("ntasks")) else None
    if (g := raw.get("ntasks-per-node")) is not None:
        per_node = _positive_int(g)
        out["ntasks_per_node"] = per_node
        if ntasks is None:
            ntasks = per_node * nodes
        elif ntasks > per_node * nodes:
            raise Unsatisfiable(
                f"{g.where}: --ntasks={ntasks} with --ntasks-per-node={per_node} needs "
                f"{-(-ntasks // per_node)} nodes; "
                + (f"--nodes={nodes} gives {nodes}" if slurm else "the embedded cluster has 1")
            )
    ntasks = ntasks or nodes  # like srun: one task per node unless told otherwise
    if ntasks < nodes:
        raise SpecError(f"--ntasks={ntasks} is fewer than --nodes={nodes}: each node needs a task")
    out["ntasks"] = ntasks
    cpt = _positive_int(g) if (g := raw.get("cpus-per-task")) else 1
    out["cpus_per_task"] = cpt

    # GPUs.
    gpu_type: str | None = None
    gpus: int | None = None
    per_task: int | None = None
    for name in ("gres", "gpus", "gpus-per-node", "gpus-per-task"):
        g = raw.get(name)
        if g is None:
            continue
        kind, count = _gres(g) if name == "gres" else _gpu_count(g)
        if gpu_type and kind and kind != gpu_type:
            raise _err(g, f"GPU type {kind!r} conflicts with {gpu_type!r} given earlier")
        gpu_type = kind or gpu_type
        total = count * ntasks if name == "gpus-per-task" else count
        if name == "gpus-per-task":
            per_task = count
        if name == "gpus-per-node":
            total = count * nodes
            out["gpus_per_node"] = count
        if gpus is not None and total != gpus:
            raise _err(g, f"asks for {total} GPUs in all but another option asked for {gpus}")
        gpus = total
    gpus = gpus or 0
    out.update(gpus=gpus, gpus_per_task=per_task, gpu_type=gpu_type)

    cpus = ntasks * cpt
    if (g := raw.get("cpus-per-gpu")) is not None:
        if not gpus:
            raise _err(g, "needs GPUs (--gpus or --gres=gpu:N)")
        cpus = max(cpus, _positive_int(g) * gpus)
    if (g := raw.get("mincpus")) is not None:
        cpus = max(cpus, _positive_int(g))
    if (g := raw.get("ntasks-per-core")) is not None and not slurm:
        per_core = _positive_int(g)
        if ntasks > node.cpus * per_core:
            raise Unsatisfiable(
                f"{g.where}: --ntasks-per-core={per_core}: {ntasks} tasks need more than "
                f"the node's {node.cpus} cores"
            )

    # Exclusive.
    exclusive = "none"
    if (g := raw.get("exclusive")) is not None:
        if g.value in (None, ""):
            exclusive = "node"
        elif g.value == "user":
            exclusive = "user"
        else:
            raise _err(g, f"expected no value or 'user', got {g.value!r}")
    if exclusive == "node" and not slurm:
        cpus = node.cpus
    out["exclusive"] = exclusive
    out["cpus"] = cpus

    # Memory.
    mem_opts = [raw.get(n) for n in ("mem", "mem-per-cpu", "mem-per-gpu")]
    mem_given = [g for g in mem_opts if g is not None]
    if len(mem_given) > 1:
        clash = " and ".join(f"--{g.long}" for g in mem_given)
        raise SpecError(f"{mem_given[-1].where}: {clash} are mutually exclusive: give one")
    mem = cpus * config.mem_per_cpu_mb
    if mem_given:
        g = mem_given[0]
        try:
            amount = parse_memory_mb(str(g.value))
        except ValueError as exc:
            raise _err(g, str(exc)) from None
        out["mem_request"] = (g.long, amount)
        if g.long == "mem":
            mem = amount
        elif g.long == "mem-per-cpu":
            mem = amount * cpus
        else:
            if not gpus:
                raise _err(g, "needs GPUs (--gpus or --gres=gpu:N)")
            mem = amount * gpus
    if exclusive == "node" and not slurm:
        mem = node.memory_mb
    out["mem_mb"] = mem

    # Partition, QoS, account, time.
    if slurm:
        _slurm_names(raw, out)
        partition = config.default_partition
    else:
        partition = _cluster_names(raw, config, who, out)
    time_limit = partition.default_time_s
    if (g := raw.get("time")) is not None:
        try:
            time_limit = parse_duration(str(g.value))
        except ValueError as exc:
            raise _err(g, str(exc)) from None
        cap = None if slurm else partition.max_time_s
        if cap is not None and (time_limit is None or time_limit > cap):
            raise Unsatisfiable(
                f"{g.where}: --time={g.value} exceeds partition {partition.name}'s "
                f"max time {partition.max_time}"
            )
    out["time_limit_s"] = time_limit
    if (g := raw.get("time-min")) is not None:
        try:
            out["time_min_s"] = parse_duration(str(g.value))
        except ValueError as exc:
            raise _err(g, str(exc)) from None

    # Output.
    for name in ("output", "error", "input"):
        if (g := raw.get(name)) is not None:
            if not g.value:
                raise _err(g, "needs a file name pattern")
            out[name] = _check_pattern(g)
    if (g := raw.get("open-mode")) is not None:
        if g.value not in ("append", "truncate"):
            raise _err(g, f"expected append or truncate, got {g.value!r}")
        out["open_mode"] = g.value

    # Environment, requeue, dependencies, arrays, signals.
    out["environment"] = _environment(raw.get("export"), req.environment)
    if (g := raw.get("requeue")) is not None:
        out["requeue"] = g.value != "no"
    if (g := raw.get("dependency")) is not None:
        out["dependencies"], out["dependency_any"] = _dependencies(g)
    if (g := raw.get("kill-on-invalid-dep")) is not None:
        if g.value not in ("yes", "no"):
            raise _err(g, f"expected yes or no, got {g.value!r}")
        out["kill_on_invalid_dep"] = g.value == "yes"
    if (g := raw.get("array")) is not None:
        out["array"] = _array(g, config.max_array_size)
    if (g := raw.get("signal")) is not None:
        sig = _signal(g)
        if time_limit is not None and sig.seconds_before >= time_limit:
            raise _err(g, f"{sig.seconds_before}s before a {time_limit}s limit is before the start")
        out["signal"] = sig

    # Scheduling hints.
    out["hold"] = raw.get("hold") is not None
    if (g := raw.get("nice")) is not None:
        try:
            nice = int(g.value) if g.value not in (None, "") else 100
        except ValueError:
            raise _err(g, f"expected an integer, got {g.value!r}") from None
        if nice < 0 and not who.is_admin:
            raise _err(g, "only an administrator may give a negative nice value")
        if abs(nice) > 2_147_483_645:
            raise _err(g, "out of range")
        out["nice"] = nice
    if (g := raw.get("begin")) is not None:
        try:
            out["begin_time"] = parse_begin(str(g.value), now)
        except ValueError as exc:
            raise _err(g, str(exc)) from None
    if (g := raw.get("comment")) is not None:
        out["comment"] = g.value
    if (g := raw.get("checkpoint-dir")) is not None:
        if not g.value:
            raise _err(g, "needs a directory")
        out["checkpoint_dir"] = os.path.normpath(os.path.join(work_dir, g.value))
    _resilience(raw, config, out)
    _container(raw, slurm, out)

    # Mail: honoured only where the cluster has a way to send it.
    if (g := raw.get("mail-type")) is not None:
        kinds = [k.strip().upper() for k in str(g.value).split(",") if k.strip()]
        valid = {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "TIME_LIMIT"}
        bad = [k for k in kinds if k not in valid]
        if bad:
            raise _err(g, f"unknown mail type {bad[0]!r}{did_you_mean(bad[0], valid)}")
        kinds = [k for k in kinds if k != "NONE"]
        if kinds and not config.mail_command and not slurm:
            raise _err(
                g,
                "cannot be honoured: this cluster has no mail transport "
                "(set mail_command in the cluster config)",
            )
        out["mail_types"] = tuple(kinds)
        out["mail_user"] = who.name
    if (g := raw.get("mail-user")) is not None:
        out["mail_user"] = _mail_user(g)

    spec = JobSpec(**out)
    if not slurm:
        check_fits(spec, config)
    return spec


def _slurm_names(raw: _Raw, out: dict[str, Any]) -> None:
    """Partition, QoS and account as given: Slurm checks them itself; "" is its default."""
    out["partition"] = raw.text("partition") or ""
    out["qos"] = raw.text("qos") or ""
    out["account"] = raw.text("account") or ""
    for key in ("partition", "qos", "account"):
        if out[key] and not re.match(r"^[A-Za-z0-9_.@,-]+$", out[key]):
            raise SpecError(f"--{key}={out[key]!r}: expected a Slurm name (letters, digits, _.-)")


def _cluster_names(raw: _Raw, config: ClusterConfig, who: Caller, out: dict[str, Any]) -> Partition:
    """Partition, QoS and account checked against the embedded cluster's config; the
    job's partition."""
    partition = config.default_partition
    if (g := raw.get("partition")) is not None:
        found = config.partition(str(g.value))
        if found is None:
            names = [p.name for p in config.partitions]
            raise _err(
                g,
                f"no partition {g.value!r}{did_you_mean(str(g.value), names)}; "
                f"partitions: {', '.join(names)}",
            )
        partition = found
    out["partition"] = partition.name
    account = config.default_account(who.name)
    if (g := raw.get("account")) is not None:
        account = str(g.value)
        if not re.match(r"^[A-Za-z0-9_.@-]+$", account):
            raise _err(g, f"invalid account name {account!r}")
        names = [a.name for a in config.accounts]
        if names and account not in names:
            raise _err(g, f"unknown account {account!r}{did_you_mean(account, names)}")
    entry = config.account(account)
    if entry is not None and not who.is_admin and not entry.open_to(who.name, who.groups):
        where = f"{g.where}: --account: " if g is not None else "default account: "
        raise SpecError(
            f"{where}user {who.name} may not charge account {account!r} "
            f"(InvalidAccount: see podium share for yours)"
        )
    out["account"] = account
    qos = config.default_qos
    if (g := raw.get("qos")) is not None:
        if config.qos_level(str(g.value)) is None:
            names = [q.name for q in config.qos]
            raise _err(
                g,
                f"no QoS {g.value!r}{did_you_mean(str(g.value), names)}; "
                f"QoS levels: {', '.join(names)}",
            )
        qos = str(g.value)
    level = config.qos_level(qos)
    if level is not None and not who.is_admin:
        where = f"{g.where}: --qos: " if g is not None else "default QoS: "
        if not level.open_to(who.name, who.groups):
            raise SpecError(
                f"{where}user {who.name} may not use QoS {qos!r} "
                "(InvalidQOS: see podium share for the QoS open to you)"
            )
        if entry is not None and entry.allow_qos and qos not in entry.allow_qos:
            raise SpecError(
                f"{where}account {account!r} allows only QoS {', '.join(entry.allow_qos)}, "
                f"not {qos!r}"
            )
    out["qos"] = qos
    return partition


def _container(raw: _Raw, slurm: bool, out: dict[str, Any]) -> None:
    """Pyxis container flags: kept for the Slurm backend, refused on the embedded one."""
    image, mounts = raw.get("container-image"), raw.get("container-mounts")
    for g in (image, mounts):
        if g is not None and not slurm:
            raise Unsatisfiable(
                f"{g.where}: --{g.long}: container jobs need backend: slurm with Pyxis; "
                "the embedded cluster runs jobs on the host"
            )
    if image is not None:
        if not image.value or any(c.isspace() for c in image.value):
            raise _err(
                image,
                f"expected an image like nvcr.io#nvidia/pytorch:24.01-py3, got {image.value!r}",
            )
        out["container_image"] = image.value
    if mounts is not None:
        if image is None:
            raise _err(mounts, "needs --container-image")
        items = [m for m in str(mounts.value).split(",") if m]
        for item in items:
            parts = item.split(":")
            if len(parts) > 3 or not all(parts[:2]) or any(c.isspace() for c in item):
                raise _err(mounts, f"expected SRC[:DST[:FLAGS]],..., got {item!r}")
        out["container_mounts"] = tuple(items)


# A login name (POSIX portable, as useradd accepts) or an e-mail address whose parts
# cannot start with '-': nothing a mail program could take for an option.
_LOGIN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
_EMAIL_RE = re.compile(
    r"^[A-Za-z0-9_+=][A-Za-z0-9_.+=-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def _mail_user(g: Given) -> str:
    """--mail-user: a user name or an e-mail address, nothing else."""
    value = str(g.value or "")
    if len(value) > 254 or not (_LOGIN_RE.match(value) or _EMAIL_RE.match(value)):
        raise _err(
            g, f"expected a user name or an e-mail address like ada@example.org, got {value!r}"
        )
    return value


def _exit_codes(g: Given) -> tuple[int, ...]:
    """A comma-separated list of exit codes 0-255 (an empty value means none)."""
    codes = []
    for part in str(g.value or "").split(","):
        part = part.strip()
        if not part:
            continue
        if not _is_digits(part) or int(part) > 255:
            raise _err(g, f"expected exit codes 0-255 separated by commas, got {part!r}")
        codes.append(int(part))
    return tuple(sorted(set(codes)))


def _resilience(raw: _Raw, config: ClusterConfig, out: dict[str, Any]) -> None:
    """Auto-resume, requeue exit codes and the heartbeat, over the cluster defaults."""
    defaults = config.resume
    out["auto_resume"] = defaults.auto_resume
    if (g := raw.get("auto-resume")) is not None:
        value = str(g.value or "")
        if not _is_digits(value) or int(value) > 1000:
            raise _err(g, f"expected a number of restarts 0-1000, got {value!r}")
        out["auto_resume"] = int(value)
    requeue = set(defaults.requeue_exit_codes)
    stop = set(defaults.no_requeue_exit_codes)
    if (g := raw.get("requeue-exit")) is not None:
        requeue = set(_exit_codes(g))
        stop -= requeue
    if (g := raw.get("no-requeue-exit")) is not None:
        stop = set(_exit_codes(g))
        both = requeue & stop
        if both and raw.get("requeue-exit") is not None:
            raise _err(g, f"exit code {min(both)} is also in --requeue-exit: pick one")
        requeue -= stop
    if 0 in requeue and (g := raw.get("requeue-exit")) is not None:
        raise _err(g, "exit code 0 means success: it cannot requeue")
    out["requeue_exit_codes"] = tuple(sorted(requeue))
    out["no_requeue_exit_codes"] = tuple(sorted(stop))
    if (g := raw.get("heartbeat-timeout")) is not None:
        value = str(g.value or "").strip()
        try:  # plain numbers are seconds here (a heartbeat is short), or sbatch's forms
            timeout = int(value) if _is_digits(value) else parse_duration(value)
        except ValueError as exc:
            raise _err(g, str(exc)) from None
        if not timeout or timeout > 2**31 - 1:
            raise _err(g, "needs a positive time in seconds or [HH:]MM:SS (e.g. 60 or 5:00)")
        out["heartbeat_timeout_s"] = timeout


def check_fits(spec: JobSpec, config: ClusterConfig) -> None:
    """Raise Unsatisfiable when `spec` can never run on the cluster, with the reason."""
    node = config.node
    gpus = node.gpus
    if spec.gpus > gpus.count:
        raise Unsatisfiable(
            f"the job asks for {spec.gpus} GPUs but node {node.name} has {gpus.count}"
        )
    if spec.gpu_type and spec.gpus and spec.gpu_type != gpus.type:
        raise Unsatisfiable(
            f"the job asks for GPU type {spec.gpu_type!r} but node {node.name} has "
            f"{gpus.count} x {gpus.type!r}"
        )
    if spec.cpus > node.cpus:
        raise Unsatisfiable(
            f"the job asks for {spec.cpus} CPUs but node {node.name} has {node.cpus}"
        )
    if spec.mem_mb > node.memory_mb:
        raise Unsatisfiable(
            f"the job asks for {spec.mem_mb} MiB of memory but node {node.name} has "
            f"{node.memory_mb} MiB"
        )
