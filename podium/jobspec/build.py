"""Build a JobSpec from a submission with sbatch's semantics, then let the backend admit it.

Options come from script directives, then YAML, then the command line; later sources
override earlier ones, as with sbatch (`podium.jobspec.request.gather`). This module reads
them as sbatch does and knows no backend: what a backend can run (one node, its
partitions and QoS, containers, mail) is its `Admission`'s business, called before the
spec is made. Anything that cannot be honoured raises SpecError naming where the option
came from; a job that can never run raises Unsatisfiable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from podium.api import containers
from podium.api.caller import Caller
from podium.api.suggest import did_you_mean
from podium.api.timefmt import parse_begin, parse_duration
from podium.config.cluster import ClusterConfig
from podium.errors import SpecError
from podium.jobspec.elastic_opts import read_elastic
from podium.jobspec.job import DEFAULT_ARRAY_OUTPUT, JobSpec
from podium.jobspec.options import SLURM_ONLY, Given
from podium.jobspec.request import Options, SubmitRequest, gather
from podium.jobspec.sizes import read_nodes, read_sizes
from podium.jobspec.values import (
    MAX_PATTERN,
    array_spec,
    dependencies,
    environment,
    exit_codes,
    is_digits,
    mail_user,
    option_error,
    output_pattern,
    signal_spec,
)

__all__ = ["Admission", "Built", "Draft", "SubmitRequest", "build_job"]

BINDING_OPTIONS = ("ntasks-per-core", "cpu-bind", "hint", "gres-flags")
_NAME_RE = re.compile(r"^[A-Za-z0-9_.*-]{1,64}$")
_BINDING_RE = re.compile(r"^[A-Za-z0-9_,:=.-]{1,256}$")
MAIL_TYPES = frozenset({"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "TIME_LIMIT"})


@dataclass
class Draft:
    """A job read with sbatch's semantics, before its backend admits it.

    `fields` are the JobSpec's fields so far; an admission fills in what its backend
    decides (partition, QoS, account, the default time limit) and may change sizes
    (a whole node for --exclusive). `max_nodes` is the top of a --nodes=MIN-MAX range.
    `options` keep where each option came from, for error messages.
    """

    options: Options
    fields: dict[str, Any]
    config: ClusterConfig
    who: Caller
    max_nodes: int = 1
    warnings: list[str] = field(default_factory=list)  # accepted, but the user should know

    def given(self, name: str) -> Given | None:
        """The option `name` as given, or None."""
        return self.options.get(name)


def one_node_count(draft: Draft) -> None:
    """Refuse a node range (`-N 2-4`) in one line: for backends that start every job on
    the count it gives (Slurm through sbatch's translation, Kubernetes: one pod per
    node)."""
    if draft.max_nodes != draft.fields["nodes"]:
        g = draft.given("nodes")
        assert g is not None
        raise option_error(g, "a node range is not supported: give one count (e.g. --nodes=2)")


class Admission(Protocol):
    """A backend's rules over sbatch semantics (one per backend, beside it).

    REFUSES names the engine-only options (`SLURM_ONLY`) this backend cannot honour,
    with the reason; the others reach its engine through `JobSpec.engine_options`.
    """

    REFUSES: ClassVar[Mapping[str, str]]

    def admit(self, draft: Draft) -> None:
        """Fill in the backend's defaults in `draft.fields`, or raise SpecError or
        Unsatisfiable saying what this backend cannot run and what would run."""


@dataclass
class Built:
    """The result of building: the spec and what only the daemon can check.

    `enter_dirs` and `write_dirs` are the directories the job's user must be able to
    enter (its working directory) and write (output directories named in the patterns), `read_paths`
    the files or directories it must be able to read (a container's image and mount
    sources), `output_files` and `input_files` the job's output and input files its
    patterns name exactly (no pattern letters): the caller checks them as that user
    (`podium.run.identity.check_dirs_as_user`), never as root.
    """

    spec: JobSpec
    dependency_where: str | None = None
    enter_dirs: tuple[str, ...] = ()
    write_dirs: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()
    output_files: tuple[str, ...] = ()
    input_files: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def build_job(
    req: SubmitRequest, config: ClusterConfig, who: Caller, now: float, admission: Admission
) -> Built:
    """Build the JobSpec for `req` and have `admission` admit it; raise SpecError or
    Unsatisfiable."""
    options, script, script_args = gather(req)
    draft = Draft(options, {"script": script, "script_args": tuple(script_args)}, config, who)
    draft.fields["engine_options"] = _engine_options(options, admission.REFUSES)
    _read(draft, req, now)
    admission.admit(draft)
    _check_signal(draft)
    spec = JobSpec(**draft.fields)
    dep = options.get("dependency")
    return Built(
        spec=spec,
        dependency_where=dep.where if dep else None,
        enter_dirs=(spec.work_dir,),
        write_dirs=_output_dirs(spec),
        read_paths=_container_paths(spec),
        output_files=_exact_files(spec, spec.output, spec.error),
        input_files=_exact_files(spec, spec.input),
        warnings=tuple(draft.warnings),
    )


def _engine_options(
    options: Options, refuses: Mapping[str, str]
) -> tuple[tuple[str, str | None], ...]:
    """The engine-only options given, in SLURM_ONLY's order; raise SpecError naming
    where the first one this backend refuses came from, with its reason."""
    found = []
    for name in SLURM_ONLY:
        if (g := options.get(name)) is None:
            continue
        if (why := refuses.get(name)) is not None:
            raise SpecError(f"{g.where}: --{name} cannot be honoured: {why}")
        found.append((name, g.value))
    return tuple(found)


def _container_paths(spec: JobSpec) -> tuple[str, ...]:
    """The container's image when it is a path (Pyxis: starting with '/' or '.'), and
    its mount sources."""
    paths = [src for src, _, _ in (m.partition(":") for m in spec.container_mounts)]
    image = spec.container_image
    if image is not None and containers.is_image_path(image):
        paths.insert(0, os.path.normpath(os.path.join(spec.work_dir, image)))
    return tuple(paths)


def _output_dirs(spec: JobSpec) -> tuple[str, ...]:
    """Directories the output patterns name explicitly (no pattern letters in them)
    where the file's own name has pattern letters (an exact name is checked whole)."""
    found: list[str] = []
    for pattern in (spec.output, spec.error):
        if pattern is None or "/" not in pattern or "%" not in os.path.basename(pattern):
            continue
        directory = os.path.dirname(os.path.join(spec.work_dir, pattern))
        if "%" not in directory and directory not in found:
            found.append(directory)
    return tuple(found)


def _exact_files(spec: JobSpec, *patterns: str | None) -> tuple[str, ...]:
    """The files these patterns name exactly (no pattern letters), from the job's
    working directory."""
    found = (os.path.join(spec.work_dir, p) for p in patterns if p is not None and "%" not in p)
    return tuple(dict.fromkeys(found))


def _read(draft: Draft, req: SubmitRequest, now: float) -> None:
    """Every option into `draft.fields`, as sbatch reads it."""
    raw, out = draft.options, draft.fields
    _names_and_dirs(raw, req, out)
    draft.max_nodes = read_nodes(raw, out)
    read_sizes(raw, out, draft.config.mem_per_cpu_mb)
    read_elastic(raw, out)
    if (g := raw.get("time")) is not None:
        try:
            out["time_limit_s"] = parse_duration(str(g.value))
        except ValueError as exc:
            raise option_error(g, str(exc)) from None
    if (g := raw.get("time-min")) is not None:
        try:
            out["time_min_s"] = parse_duration(str(g.value))
        except ValueError as exc:
            raise option_error(g, str(exc)) from None

    # Output.
    for name in ("output", "error", "input"):
        if (g := raw.get(name)) is not None:
            if not g.value:
                raise option_error(g, "needs a file name pattern")
            out[name] = output_pattern(g)
    if (g := raw.get("open-mode")) is not None:
        if g.value not in ("append", "truncate"):
            raise option_error(g, f"expected append or truncate, got {g.value!r}")
        out["open_mode"] = g.value

    # Environment, requeue, dependencies, arrays, signals.
    out["environment"] = environment(raw.get("export"), req.environment)
    if (g := raw.get("requeue")) is not None:
        out["requeue"] = g.value != "no"
    if (g := raw.get("dependency")) is not None:
        out["dependencies"], out["dependency_any"] = dependencies(g)
    if (g := raw.get("kill-on-invalid-dep")) is not None:
        if g.value not in ("yes", "no"):
            raise option_error(g, f"expected yes or no, got {g.value!r}")
        out["kill_on_invalid_dep"] = g.value == "yes"
    if (g := raw.get("array")) is not None:
        out["array"] = array_spec(g, draft.config.max_array_size)
        out.setdefault("output", DEFAULT_ARRAY_OUTPUT)  # as sbatch: array id _ task id
    if (g := raw.get("signal")) is not None:
        out["signal"] = signal_spec(g)

    _hints(raw, out, draft.who, now)
    _resilience(raw, draft.config, out)
    _container(raw, out)
    _mail(raw, out, draft.who)


def _names_and_dirs(raw: Options, req: SubmitRequest, out: dict[str, Any]) -> None:
    """The job's name, its submit and working directories, and its umask."""
    if (g := raw.get("job-name")) is not None:
        if not g.value or "\n" in g.value:
            raise option_error(g, "a job name must be one non-empty line")
        if len(g.value) > 1024:
            raise option_error(g, "a job name may be at most 1024 characters")
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
            raise option_error(g, f"needs a directory (at most {MAX_PATTERN} characters)")
        work_dir = os.path.normpath(os.path.join(req.cwd, str(g.value)))
    out["work_dir"] = work_dir
    out["umask"] = req.umask if req.umask is not None else 0o022


def _hints(raw: Options, out: dict[str, Any], who: Caller, now: float) -> None:
    """--hold, --nice, --begin, --comment and --checkpoint-dir."""
    out["hold"] = raw.get("hold") is not None
    if (g := raw.get("nice")) is not None:
        try:
            nice = int(g.value) if g.value not in (None, "") else 100
        except ValueError:
            raise option_error(g, f"expected an integer, got {g.value!r}") from None
        if nice < 0 and not who.is_admin:
            raise option_error(g, "only an administrator may give a negative nice value")
        if abs(nice) > 2_147_483_645:
            raise option_error(g, "out of range")
        out["nice"] = nice
    if (g := raw.get("begin")) is not None:
        try:
            out["begin_time"] = parse_begin(str(g.value), now)
        except ValueError as exc:
            raise option_error(g, str(exc)) from None
    if (g := raw.get("comment")) is not None:
        out["comment"] = g.value
    if (g := raw.get("wckey")) is not None:
        if not g.value or not _NAME_RE.match(g.value):
            raise option_error(
                g, f"expected a workload key (letters, digits, _.-), got {g.value!r}"
            )
        out["wckey"] = g.value
    binding = []
    for name in BINDING_OPTIONS:
        if (g := raw.get(name)) is not None:
            if not g.value or not _BINDING_RE.match(g.value):
                raise option_error(g, f"expected a value like sbatch's, got {g.value!r}")
            binding.append((name, g.value))
    out["binding"] = tuple(binding)
    if (g := raw.get("checkpoint-dir")) is not None:
        if not g.value:
            raise option_error(g, "needs a directory")
        out["checkpoint_dir"] = os.path.normpath(os.path.join(out["work_dir"], g.value))


def _check_signal(draft: Draft) -> None:
    """--signal must fall after the start of the (admitted) time limit."""
    sig, limit = draft.fields.get("signal"), draft.fields.get("time_limit_s")
    if sig is not None and limit is not None and sig.seconds_before >= limit:
        g = draft.options.get("signal")
        assert g is not None
        raise option_error(g, f"{sig.seconds_before}s before a {limit}s limit is before the start")


def _container(raw: Options, out: dict[str, Any]) -> None:
    """Pyxis' container options, checked for form (podium.api.containers); what the
    image is and whether the paths exist is the backend's to check."""
    others = [g for g in raw.named("container-") if g.long != "container-name"]
    if raw.get("container-image") is None and others:
        raise option_error(others[0], "needs --container-image")
    for option, key in containers.VALUED.items():
        if (g := raw.get(option)) is None:
            continue
        try:
            value = containers.check_value(option, str(g.value or ""))
        except ValueError as exc:
            why = str(exc)
            if option == "container-image":
                why = (
                    "expected an image like nvcr.io#nvidia/pytorch:24.01-py3 or the path of "
                    f"a squashfs file or root directory, got {g.value!r}"
                )
            raise option_error(g, why) from None
        out[f"container_{key}" if key != "env_names" else "container_env"] = (
            tuple(value) if isinstance(value, list) else value
        )
    for option, (key, _) in containers.SWITCHES.items():
        if (g := raw.get(option)) is not None:  # the "off" forms arrive as value "no"
            out[f"container_{key}"] = g.value != "no"


def _mail(raw: Options, out: dict[str, Any], who: Caller) -> None:
    """--mail-type and --mail-user (the submitter unless told otherwise)."""
    if (g := raw.get("mail-type")) is not None:
        kinds = [k.strip().upper() for k in str(g.value).split(",") if k.strip()]
        bad = [k for k in kinds if k not in MAIL_TYPES]
        if bad:
            raise option_error(g, f"unknown mail type {bad[0]!r}{did_you_mean(bad[0], MAIL_TYPES)}")
        out["mail_types"] = tuple(k for k in kinds if k != "NONE")
        out["mail_user"] = who.name
    if (g := raw.get("mail-user")) is not None:
        out["mail_user"] = mail_user(g)


def _resilience(raw: Options, config: ClusterConfig, out: dict[str, Any]) -> None:
    """Auto-resume, requeue exit codes and the heartbeat, over the cluster defaults."""
    defaults = config.resume
    out["auto_resume"] = defaults.auto_resume
    if (g := raw.get("auto-resume")) is not None:
        value = str(g.value or "")
        if not is_digits(value) or int(value) > 1000:
            raise option_error(g, f"expected a number of restarts 0-1000, got {value!r}")
        out["auto_resume"] = int(value)
    requeue = set(defaults.requeue_exit_codes)
    stop = set(defaults.no_requeue_exit_codes)
    if (g := raw.get("requeue-exit")) is not None:
        requeue = set(exit_codes(g))
        stop -= requeue
    if (g := raw.get("no-requeue-exit")) is not None:
        stop = set(exit_codes(g))
        both = requeue & stop
        if both and raw.get("requeue-exit") is not None:
            raise option_error(g, f"exit code {min(both)} is also in --requeue-exit: pick one")
        requeue -= stop
    if 0 in requeue and (g := raw.get("requeue-exit")) is not None:
        raise option_error(g, "exit code 0 means success: it cannot requeue")
    out["requeue_exit_codes"] = tuple(sorted(requeue))
    out["no_requeue_exit_codes"] = tuple(sorted(stop))
    if (g := raw.get("heartbeat-timeout")) is not None:
        value = str(g.value or "").strip()
        try:  # plain numbers are seconds here (a heartbeat is short), or sbatch's forms
            timeout = int(value) if is_digits(value) else parse_duration(value)
        except ValueError as exc:
            raise option_error(g, str(exc)) from None
        if not timeout or timeout > 2**31 - 1:
            raise option_error(
                g, "needs a positive time in seconds or [HH:]MM:SS (e.g. 60 or 5:00)"
            )
        out["heartbeat_timeout_s"] = timeout
