"""What a job asks of the nodes, read as sbatch reads it: the node count (or range),
--nodelist, --exclude and --constraint as written, and the tasks, CPUs, GPUs,
--exclusive and memory per node. Backends decide what they can give (`Admission`)."""

from __future__ import annotations

import re
from typing import Any

from podium.api.timefmt import parse_memory_mb
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.request import Options
from podium.jobspec.values import SHARED_GRES, gpu_count, gres, option_error, positive_int

_NODE_NAMES_RE = re.compile(r"^[A-Za-z0-9_.\[\]-]+$")
_FEATURES_RE = re.compile(r"^[A-Za-z0-9_.&|,()\[\]*-]+$")


def read_nodes(raw: Options, out: dict[str, Any]) -> int:
    """--nodes (a count or MIN-MAX), --nodelist, --exclude and --constraint as written,
    into `out`; returns the top of the node range (the count when no range)."""
    nodes = most = 1
    if (g := raw.get("nodes")) is not None:
        match = re.match(r"^(\d+)(?:-(\d+))?$", str(g.value))
        if not match:
            raise option_error(g, f"expected N or MIN-MAX, got {g.value!r}")
        nodes = int(match.group(1))
        if nodes < 1:
            raise option_error(g, "needs at least 1 node")
        most = int(match.group(2) or nodes)
        if most < nodes:
            raise option_error(g, f"the range {g.value} is backwards: give MIN-MAX")
    if (g := raw.get("wait-all-nodes")) is not None and g.value not in ("0", "1"):
        raise option_error(g, f"expected 0 or 1, got {g.value!r}")
    out["nodes"] = nodes
    for name in ("nodelist", "exclude"):
        if (g := raw.get(name)) is not None:
            names = [n for n in str(g.value).split(",") if n]
            if not names or not all(_NODE_NAMES_RE.match(n) for n in names):
                raise option_error(g, f"expected node names like node1,node[2-4], got {g.value!r}")
            out[name] = tuple(names)
    if (g := raw.get("constraint")) is not None:
        if not _FEATURES_RE.match(str(g.value)):
            raise option_error(g, f"expected features joined with & or |, got {g.value!r}")
        out["constraint"] = str(g.value)
    return most


def read_sizes(raw: Options, out: dict[str, Any], mem_per_cpu_mb: int) -> None:
    """Tasks, CPUs, GPUs, --exclusive and memory, as the job asks for them."""
    ntasks = _read_tasks(raw, out)
    cpt = positive_int(g) if (g := raw.get("cpus-per-task")) else 1
    out["cpus_per_task"] = cpt
    if (g := raw.get("ntasks-per-core")) is not None:
        positive_int(g)
    gpus, gpu_units = _read_gpus(raw, out, ntasks)
    cpus = ntasks * cpt
    if (g := raw.get("cpus-per-gpu")) is not None:
        if not gpus:
            raise option_error(g, "needs GPUs (--gpus or --gres=gpu:N)")
        cpus = max(cpus, positive_int(g) * gpu_units)
    if (g := raw.get("mincpus")) is not None:
        cpus = max(cpus, positive_int(g))
    out["cpus"] = cpus
    exclusive = "none"
    if (g := raw.get("exclusive")) is not None:
        if g.value in (None, ""):
            exclusive = "node"
        elif g.value == "user":
            exclusive = "user"
        else:
            raise option_error(g, f"expected no value or 'user', got {g.value!r}")
    out["exclusive"] = exclusive
    out["mem_mb"] = _read_memory(raw, out, cpus * mem_per_cpu_mb, cpus, gpus, gpu_units)


def _read_tasks(raw: Options, out: dict[str, Any]) -> int:
    """--ntasks and --ntasks-per-node against --nodes: the job's task count."""
    nodes = out["nodes"]
    ntasks = positive_int(g) if (g := raw.get("ntasks")) else None
    if (g := raw.get("ntasks-per-node")) is not None:
        per_node = positive_int(g)
        out["ntasks_per_node"] = per_node
        if ntasks is None:
            ntasks = per_node * nodes
        elif ntasks > per_node * nodes:
            raise Unsatisfiable(
                f"{g.where}: --ntasks={ntasks} with --ntasks-per-node={per_node} needs "
                f"{-(-ntasks // per_node)} nodes; --nodes={nodes} gives {nodes}"
            )
    ntasks = ntasks or nodes  # like srun: one task per node unless told otherwise
    if ntasks < nodes:
        raise SpecError(f"--ntasks={ntasks} is fewer than --nodes={nodes}: each node needs a task")
    out["ntasks"] = ntasks
    return int(ntasks)


def _read_gpus(raw: Options, out: dict[str, Any], ntasks: int) -> tuple[int, int]:
    """--gres, --gpus, --gpus-per-node and --gpus-per-task, which must agree: the GPUs in
    all, and the whole GPUs they take (1 for an MPS share or shards of one GPU)."""
    nodes = out["nodes"]
    gpu_type: str | None = None
    gpus: int | None = None
    per_task: int | None = None
    for name in ("gres", "gpus", "gpus-per-node", "gpus-per-task"):
        g = raw.get(name)
        if g is None:
            continue
        kind, count = gres(g) if name == "gres" else gpu_count(g)
        if gpu_type and kind and kind != gpu_type:
            raise option_error(g, f"GPU type {kind!r} conflicts with {gpu_type!r} given earlier")
        gpu_type = kind or gpu_type
        total = count * ntasks if name == "gpus-per-task" else count
        if name == "gpus-per-task":
            per_task = count
        if name == "gpus-per-node":
            total = count * nodes
            out["gpus_per_node"] = count
        if gpus is not None and total != gpus:
            raise option_error(
                g, f"asks for {total} GPUs in all but another option asked for {gpus}"
            )
        gpus = total
    gpus = gpus or 0
    out.update(gpus=gpus, gpus_per_task=per_task, gpu_type=gpu_type)
    shared = gpu_type in SHARED_GRES
    if shared and (per_task is not None or out.get("gpus_per_node") is not None):
        raise SpecError(f"--gres={gpu_type}:N is a share of one GPU: not per task or per node")
    return gpus, 1 if shared else gpus


def _read_memory(
    raw: Options, out: dict[str, Any], default_mb: int, cpus: int, gpus: int, gpu_units: int
) -> int:
    """--mem, --mem-per-cpu or --mem-per-gpu (one at most): the job's memory in MB."""
    mem_given = [g for n in ("mem", "mem-per-cpu", "mem-per-gpu") if (g := raw.get(n))]
    if len(mem_given) > 1:
        clash = " and ".join(f"--{g.long}" for g in mem_given)
        raise SpecError(f"{mem_given[-1].where}: {clash} are mutually exclusive: give one")
    if not mem_given:
        return default_mb
    g = mem_given[0]
    try:
        amount = parse_memory_mb(str(g.value), zero_ok=g.long == "mem")
    except ValueError as exc:
        raise option_error(g, str(exc)) from None
    out["mem_request"] = (g.long, amount)
    if g.long == "mem":
        return amount
    if g.long == "mem-per-cpu":
        return amount * cpus
    if not gpus:
        raise option_error(g, "needs GPUs (--gpus or --gres=gpu:N)")
    return amount * gpu_units
