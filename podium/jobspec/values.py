"""Parsers for single option values, in sbatch's formats: each takes the option as
given and returns its checked value, or raises SpecError naming where it came from."""

from __future__ import annotations

import re
import signal as signals

from podium.api import arrays
from podium.api.suggest import did_you_mean
from podium.errors import SpecError
from podium.jobspec.job import ArraySpec, Dependency, DependencyKind, SignalSpec
from podium.jobspec.options import Given

MAX_COUNT = 2**31 - 1  # the most of anything a job may ask for (tasks, CPUs, GPUs)
MAX_JOB_ID = 2**32 - 2  # job ids are 32-bit, as in Slurm
MAX_PATTERN = 4096  # PATH_MAX: the longest output pattern or directory
MAX_PAD = 10  # the widest zero-padding of a pattern (%10j)
MAX_SCRIPT_BYTES = 4 << 20  # a batch script, --wrap or job file (Slurm's max_script_size)
MAX_ARG_BYTES = 128 << 10  # one argument or variable (the kernel's MAX_ARG_STRLEN)
MAX_ENV_BYTES = 1 << 20  # a job's whole environment: half of a usual ARG_MAX, for exec
MAX_ARGS = 10_000  # options or script arguments in one submission
_DIGITS_RE = re.compile(r"[0-9]+")


def is_digits(text: str) -> bool:
    """ASCII digits only: str.isdigit() also admits '²', which int() refuses."""
    return _DIGITS_RE.fullmatch(text) is not None


def option_error(g: Given, message: str) -> SpecError:
    return SpecError(f"{g.where}: --{g.long}: {message}")


def positive_int(g: Given, minimum: int = 1) -> int:
    try:
        value = int(str(g.value))
    except ValueError:
        raise option_error(g, f"expected an integer, got {g.value!r}") from None
    if value < minimum:
        raise option_error(g, f"must be at least {minimum}, got {value}")
    if value > MAX_COUNT:
        raise option_error(g, f"must be at most {MAX_COUNT}, got {value}")
    return value


_GPU_COUNT_RE = re.compile(r"^(?:([A-Za-z0-9_.-]+):)?(\d+)$")


SHARED_GRES = ("mps", "shard")  # parts of one GPU, counted in units (podium.node.slices)

# Slurm's AutoDetect=nvml names a MIG slice's type after its GPU and profile
# (nvidia_h100_80gb_hbm3_1g.10gb); Podium's type is the profile.
_SLURM_MIG_TYPE = re.compile(r"^[A-Za-z0-9_.-]+_(\d+g\.\d+gb)$")


def gpu_type(name: str, g: Given) -> str:
    """A requested GPU type as Podium names it: a MIG slice by its profile, whether
    given as 1g.10gb or as Slurm's nvidia_h100_80gb_hbm3_1g.10gb. A share's name
    (mps, shard) is not a GPU type: it is asked for with --gres=mps:N."""
    if name in SHARED_GRES:
        raise option_error(g, f"{name!r} is not a GPU type: ask for a share with --gres={name}:N")
    match = _SLURM_MIG_TYPE.match(name)
    return match.group(1) if match else name


def gpu_count(g: Given) -> tuple[str | None, int]:
    match = _GPU_COUNT_RE.match(str(g.value))
    if not match:
        raise option_error(g, f"expected [type:]count, got {g.value!r}")
    kind = gpu_type(match.group(1), g) if match.group(1) else None
    return kind, _bounded_count(g, int(match.group(2)))


def _bounded_count(g: Given, count: int) -> int:
    if count > MAX_COUNT:
        raise option_error(g, f"asks for {count}: at most {MAX_COUNT}")
    return count


def gres(g: Given) -> tuple[str | None, int]:
    """(type, count) of --gres: GPUs (gpu[:type][:count], the type None when not
    given) or a share of a GPU (mps:N, N percent; shard:N), never both."""
    kind: str | None = None
    count = 0
    items = str(g.value).split(",")
    names = {item.split(":")[0] for item in items}
    if names & set(SHARED_GRES) and len(items) > 1:
        raise option_error(g, "give GPUs, an MPS share or shards, one of them")
    for item in items:
        parts = item.split(":")
        if parts[0] in SHARED_GRES:
            if len(parts) != 2 or not is_digits(parts[1]) or int(parts[1]) < 1:
                raise option_error(g, f"expected {parts[0]}:N with N at least 1, got {item!r}")
            if parts[0] == "mps" and int(parts[1]) > 100:
                raise option_error(g, f"mps:{parts[1]} is over 100: a share is a percent of a GPU")
            return parts[0], _bounded_count(g, int(parts[1]))
        if parts[0] != "gpu":
            raise option_error(
                g,
                f"unknown generic resource {parts[0]!r}: this cluster has 'gpu', 'mps' and 'shard'",
            )
        if len(parts) == 1:
            n = 1
        elif len(parts) == 2:
            if is_digits(parts[1]):
                n = int(parts[1])
            else:
                kind, n = gpu_type(parts[1], g), 1
        elif len(parts) == 3 and is_digits(parts[2]):
            kind, n = gpu_type(parts[1], g), int(parts[2])
        else:
            raise option_error(g, f"expected gpu[:type][:count], got {item!r}")
        count += _bounded_count(g, n)
    return kind, _bounded_count(g, count)


def signal_number(text: str, g: Given) -> int:
    if is_digits(text):
        num = int(text)
        if not 1 <= num < signals.NSIG:
            raise option_error(g, f"signal number {num} out of range")
        return num
    name = text.upper()
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise option_error(g, f"unknown signal {text!r} (e.g. USR1, TERM, 10)") from None


def signal_spec(g: Given) -> SignalSpec:
    text = str(g.value)
    batch_only = False
    if ":" in text:
        flag, text = text.split(":", 1)
        if flag == "B":
            batch_only = True
        elif flag == "R":
            raise option_error(g, "the R flag is for reservations, which Podium does not use")
        else:
            raise option_error(g, f"expected [B:]signal[@seconds], got {g.value!r}")
    seconds = 60
    if "@" in text:
        text, when = text.split("@", 1)
        if not is_digits(when) or not 0 <= int(when) <= 65535:
            raise option_error(g, f"expected seconds after '@', got {when!r}")
        seconds = int(when)
    return SignalSpec(signum=signal_number(text, g), seconds_before=seconds, batch_only=batch_only)


def array_spec(g: Given, max_size: int) -> ArraySpec:
    """--array: indices must be below `max_size` (Slurm's MaxArraySize), and so must
    their number. Sizes are checked per range in constant time before anything is
    expanded, so no request can make the daemon build a huge list."""
    text = str(g.value)
    throttle: int | None = None
    if "%" in text:
        text, limit = text.rsplit("%", 1)
        if not is_digits(limit) or not 1 <= int(limit) <= MAX_COUNT:
            raise option_error(
                g, f"the throttle after '%' must be a positive integer, got {limit!r}"
            )
        throttle = int(limit)
    ranges: list[range] = []
    for part in text.split(","):
        match = re.match(r"^([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?$", part)
        if not match:
            raise option_error(g, f"expected indices like 0-15, 1,3,5 or 0-15:4%2, got {part!r}")
        start = int(match.group(1))
        stop = int(match.group(2)) if match.group(2) else start
        step = int(match.group(3)) if match.group(3) else 1
        if stop < start or step < 1:
            raise option_error(g, f"empty or backwards range {part!r}")
        if stop >= max_size:
            raise option_error(
                g, f"index {stop} is too large: indices must be below MaxArraySize={max_size}"
            )
        ranges.append(range(start, stop + 1, step))
    if sum(len(r) for r in ranges) > max_size:  # len(range) is O(1)
        raise option_error(g, f"an array may have at most {max_size} tasks (MaxArraySize)")
    return ArraySpec(ranges=arrays.format_ranges(arrays.normal(ranges)), throttle=throttle)


_DEP_KINDS: tuple[DependencyKind, ...] = ("after", "afterok", "afternotok", "afterany")


def dependencies(g: Given) -> tuple[tuple[Dependency, ...], bool]:
    text = str(g.value)
    if "," in text and "?" in text:
        raise option_error(g, "use either ',' (all) or '?' (any) between clauses, not both")
    any_mode = "?" in text
    clauses: list[Dependency] = []
    for clause in re.split(r"[,?]", text):
        if clause == "singleton":
            clauses.append(Dependency(kind="singleton"))
            continue
        kind, _, ids = clause.partition(":")
        if kind not in _DEP_KINDS:
            hint = did_you_mean(kind, [*_DEP_KINDS, "singleton"])
            raise option_error(g, f"unknown dependency type {kind!r}{hint}")
        job_ids: list[int] = []
        for jid in ids.split(":") if ids else []:
            if "+" in jid:
                raise option_error(g, "time offsets (+minutes) in dependencies are not supported")
            base = jid.split("_", 1)[0]
            if not is_digits(base) or not 1 <= int(base) <= MAX_JOB_ID:
                raise option_error(
                    g, f"expected job ids (1-{MAX_JOB_ID}) after {kind}:, got {jid!r}"
                )
            job_ids.append(int(base))
        if not job_ids:
            raise option_error(g, f"{kind} needs at least one job id ({kind}:123)")
        clauses.append(Dependency(kind=kind, job_ids=tuple(job_ids)))
    return tuple(clauses), any_mode


_PATTERN_RE = re.compile(r"%(\d*)(.)")
_PATTERN_LETTERS = "%AaJjNnstux"


def output_pattern(g: Given) -> str:
    """An output pattern: known letters only, padding of at most MAX_PAD digits, and no
    longer than a path may be."""
    text = str(g.value)
    if len(text) > MAX_PATTERN:
        raise option_error(g, f"a file name pattern may be at most {MAX_PATTERN} characters")
    for match in _PATTERN_RE.finditer(text):
        if match.group(1) and int(match.group(1)) > MAX_PAD:
            raise option_error(
                g, f"zero-padding %{match.group(1)}{match.group(2)}: at most {MAX_PAD}"
            )
        if match.group(2) not in _PATTERN_LETTERS:
            raise option_error(
                g,
                f"unknown pattern %{match.group(2)}: expected %%, %A, %a, %J, %j, %N, %n, %s, "
                "%t, %u, %x",
            )
    return text


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MINIMAL_ENV = ("HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM")


# The client's credentials, never a job's: the environment a job inherits from its
# submitter leaves them out (an explicit --export=NAME=VALUE still sets one).
CLIENT_ONLY_ENV = frozenset({"PODIUM_TOKEN"})


def environment(g: Given | None, submitted: dict[str, str]) -> dict[str, str]:
    """Resolve --export into the job's base environment (like sbatch at submit time).
    The submitter's CLIENT_ONLY_ENV (its API token) is never inherited."""
    submitted = {k: v for k, v in submitted.items() if k not in CLIENT_ONLY_ENV}
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
        raise option_error(g, "expected ALL, NONE or NAME[=value] list")
    if inherit:
        env.update(submitted)
    else:
        env.update({k: submitted[k] for k in _MINIMAL_ENV if k in submitted})
    for item in items:
        name, eq, value = item.partition("=")
        if not _ENV_NAME_RE.match(name):
            raise option_error(g, f"{name!r} is not a valid environment variable name")
        if eq:
            env[name] = value
        elif name in submitted:
            env[name] = submitted[name]
    return env


# A login name (POSIX portable, as useradd accepts) or an e-mail address whose parts
# cannot start with '-': nothing a mail program could take for an option.
_LOGIN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?$")
_EMAIL_RE = re.compile(
    r"^[A-Za-z0-9_+=][A-Za-z0-9_.+=-]{0,63}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


def mail_user(g: Given) -> str:
    """--mail-user: a user name or an e-mail address, nothing else."""
    value = str(g.value or "")
    if len(value) > 254 or not (_LOGIN_RE.match(value) or _EMAIL_RE.match(value)):
        raise option_error(
            g, f"expected a user name or an e-mail address like ada@example.org, got {value!r}"
        )
    return value


def exit_codes(g: Given) -> tuple[int, ...]:
    """A comma-separated list of exit codes 0-255 (an empty value means none)."""
    codes = []
    for part in str(g.value or "").split(","):
        part = part.strip()
        if not part:
            continue
        if not is_digits(part) or int(part) > 255:
            raise option_error(g, f"expected exit codes 0-255 separated by commas, got {part!r}")
        codes.append(int(part))
    return tuple(sorted(set(codes)))
