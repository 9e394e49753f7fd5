"""--elastic=MIN:MAX[:STEP], --resize-grace, --resize-signal, --spares and --torchft: an elastic
job's replicas, what each holds and its spares, read after the sizes (`sizes.read_sizes`).

Each replica is one task (one data-parallel rank) with --gpus-per-task GPUs,
--cpus-per-task CPUs and memory per GPU or per CPU. On the embedded cluster an elastic
job is one node's worth of replicas; the job's resources as stored are its MIN
replicas', and the scheduler sizes each start between MIN and MAX
(`podium.sched.elastic`). The Slurm and Kubernetes backends' admissions make each
replica a node (a Slurm job) or a pod of its own. --spares=N adds N
replicas' worth to every size: held idle, they take a failed replica's place.
Without --elastic, --spares=N is N whole nodes (the Slurm backend's spare nodes,
`podium.backends.slurm.replica_keeper`); the other backends refuse it. --torchft makes
each replica a torchft replica group, with a lighthouse Podium runs (podium.run.torchft).
"""

from __future__ import annotations

from typing import Any

from podium.api.timefmt import parse_duration
from podium.jobspec.job import ElasticSpec
from podium.jobspec.options import Given
from podium.jobspec.request import Options
from podium.jobspec.values import is_digits, option_error, signal_number

MAX_REPLICAS = 1024
MAX_SPARES = 64
_NOT_WITH = ("ntasks", "ntasks-per-node", "gpus", "gpus-per-node", "array", "mem")


def read_elastic(raw: Options, out: dict[str, Any]) -> None:
    """Fill `out["elastic"]` and size `out` for MIN replicas; SpecError in one line."""
    g = raw.get("elastic")
    if g is None:
        for name in ("resize-grace", "resize-signal"):
            if (other := raw.get(name)) is not None:
                raise option_error(other, "applies to elastic jobs only: add --elastic=MIN:MAX")
        if raw.get("spares") is not None:  # whole nodes, on Slurm (its admission judges)
            out["spare_nodes"] = _spare_count(raw)
        if (ft := raw.get("torchft")) is not None:
            if not out.get("spare_nodes"):
                raise option_error(ft, "each replica is a torchft replica group: add "
                                   "--elastic=N:N with --gpus-per-task, or on Slurm -N N "
                                   "--spares=S")  # fmt: skip
            out["torchft"] = True
        return
    parts = str(g.value or "").split(":")
    if not 2 <= len(parts) <= 3 or not all(is_digits(p) for p in parts):
        raise option_error(
            g, f"expected MIN:MAX[:STEP] replicas (e.g. 2:8 or 2:8:2), got {g.value!r}"
        )
    low, high, step = int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 1
    if not 1 <= low <= high <= MAX_REPLICAS or step < 1:
        raise option_error(
            g, f"needs 1 <= MIN <= MAX <= {MAX_REPLICAS} and STEP >= 1, got {g.value!r}"
        )
    for name in _NOT_WITH:
        if (clash := raw.get(name)) is not None:
            what = "give GPUs per replica with --gpus-per-task" if name.startswith("gpus") else (
                "give memory per replica with --mem-per-gpu or --mem-per-cpu" if name == "mem"
                else "the replicas are its tasks")  # fmt: skip
            raise option_error(clash, f"does not go with --elastic: {what}")
    if out.get("nodes", 1) != 1:
        raise option_error(g, "an elastic job's replicas share one node: drop --nodes")
    # Sized for one task, `out` holds one replica's GPUs, CPUs and memory.
    gpus, cpus, memory = int(out.get("gpus") or 0), int(out["cpus"]), int(out["mem_mb"])
    spec = ElasticSpec(
        min=low, max=high, step=step, replica_gpus=gpus, replica_cpus=cpus,
        replica_mem_mb=memory, spares=_spares(raw, gpus), **_resize_options(raw),
    )  # fmt: skip
    held_gpus, held_cpus, held_mem = spec.held(low)
    out.update(
        elastic=spec,
        torchft=raw.get("torchft") is not None,
        ntasks=low,
        gpus=held_gpus,
        gpus_per_task=gpus or None,
        cpus=held_cpus,
        mem_mb=held_mem,
    )


def _spares(raw: Options, replica_gpus: int) -> int:
    """--spares=N: replicas' worth held idle to replace a failed replica (0 to 64)."""
    count = _spare_count(raw)
    if count and not replica_gpus:
        g = raw.get("spares")
        assert g is not None
        raise option_error(g, "a spare takes a failed replica's GPUs: give --gpus-per-task")
    return count


def _spare_count(raw: Options) -> int:
    """--spares=N as a number, 0 to MAX_SPARES (0 when not given)."""
    g = raw.get("spares")
    if g is None:
        return 0
    value = str(g.value or "").strip()
    if not is_digits(value) or not 0 <= int(value) <= MAX_SPARES:
        raise option_error(g, f"needs a number of spare replicas, 0 to {MAX_SPARES}, e.g. 1")
    return int(value)


def refuse_spare_nodes(draft_fields: dict[str, Any], given: Given | None) -> None:
    """For backends whose spares are GPUs of an elastic job (not whole nodes): --spares
    without --elastic is refused in one line. `given` is the option as given (or None)."""
    if draft_fields.get("spare_nodes") and given is not None:
        raise option_error(
            given,
            "spares replace replicas Podium runs: add --elastic=N:N (a fixed N "
            "replicas) or --elastic=MIN:MAX, with --gpus-per-task",
        )


def _resize_options(raw: Options) -> dict[str, int]:
    """--resize-grace (seconds, or sbatch's time forms) and --resize-signal."""
    found: dict[str, int] = {}
    if (g := raw.get("resize-grace")) is not None:
        value = str(g.value or "").strip()
        try:
            grace = int(value) if is_digits(value) else parse_duration(value)
        except ValueError as exc:
            raise option_error(g, str(exc)) from None
        if grace is None or not 0 <= grace <= 86_400:
            raise option_error(g, "needs 0 to 86400 seconds, or [HH:]MM:SS (e.g. 60 or 2:00)")
        found["grace_s"] = grace
    if (g := raw.get("resize-signal")) is not None:
        found["signal"] = signal_number(str(g.value or ""), g)
    return found
