"""`podium mig advise` on the embedded cluster: the node's MIG-capable GPUs as they are,
the pending queue's GPU demand, the advisor's answer (podium.sched.mig_advice) and the
configs that would apply it (podium.node.mig_config), as one JSON-ready record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from podium.api.mig import model_for, profiles
from podium.node.mig_config import mig_parted, podium_lines, slurm_lines
from podium.sched.mig_advice import WHOLE, Advice, GpuNow, Running, Waiting, advise
from podium.sched.model import PendingJob
from podium.server.job_rows import held_units
from podium.server.local_node import LocalNode
from podium.server.reactor import Reactor
from podium.store.db import Row

MAX_TASKS = 64  # a pending array stands for at most this many jobs in the advice


def end_estimate(r: Row) -> float:
    """When a running job's time limit ends it (inf: it has none)."""
    limit = r["time_limit_s"]
    return (r["start_time"] or 0.0) + limit if limit is not None else math.inf


def finite(at: float) -> float | None:
    """A time for JSON: None for "never" (inf)."""
    return None if math.isinf(at) else at


def gpus_now(node: LocalNode, running: Iterable[Row]) -> list[GpuNow]:
    """The node's GPUs that MIG could split (not shared by shards or MPS), with their
    layouts and the jobs running on them."""
    devices = {d.index: d for d in node.devices}
    on_gpu: dict[int, list[Running]] = {}
    for r in running:
        end = end_estimate(r)
        for g in held_units(r):
            d = devices.get(g)
            if d is None or d.kind in ("shard", "mps"):
                continue
            kind = d.type if d.kind == "mig" else "whole"
            on_gpu.setdefault(d.physical, []).append(Running(r["job_id"], kind, end))
    shared = {d.physical for d in node.devices if d.kind in ("shard", "mps")}
    out = []
    for gpu in node.gpus:
        model = model_for(gpu.type, gpu.memory_mb)
        if model is None or gpu.index in shared:
            continue
        layout = tuple(d.type for d in node.devices if d.kind == "mig" and d.parent == gpu.index)
        out.append(GpuNow(gpu.index, model, layout or WHOLE, tuple(on_gpu.get(gpu.index, ()))))
    return out


def demand(
    pending: Iterable[PendingJob], whole_type: str, priority: Mapping[int, float]
) -> list[Waiting]:
    """The pending jobs' GPU demand: whole GPUs (no type, or the GPU's) or MIG
    profiles; jobs without GPUs, shards and MPS shares are not MIG's to serve. An
    array's tasks count once each, up to MAX_TASKS."""
    out = []
    for job in pending:
        if not job.gpus or job.held or job.gpu_type in ("shard", "mps"):
            continue
        kind = "whole" if job.gpu_type in (None, whole_type) else str(job.gpu_type)
        weight = priority.get(job.job_id, float(job.qos_priority))
        for _ in range(min(job.count, MAX_TASKS)):
            out.append(Waiting(job.job_id, kind, job.gpus, weight, job.submit_time))
    return out


def advice_record(
    node: LocalNode,
    gpu_type: str,
    running: list[Row],
    pending: Iterable[PendingJob],
    priority: Mapping[int, float],
    now: float,
) -> dict[str, Any]:
    """What `podium mig advise --json` prints."""
    gpus = gpus_now(node, running)
    answer = advise(gpus, demand(pending, gpu_type, priority), now)
    advised = {c.gpu: c.advised for c in answer.changes}
    return {
        "node": node.name,
        "gpus": [_change(c) for c in answer.changes],
        "before": vars(answer.before),
        "after": vars(answer.after),
        "unplaceable": sorted(set(answer.unplaceable)),
        "profiles": sorted({p for g in gpus for p in profiles(g.model)}),
        "configs": {
            "mig_parted": mig_parted(advised),
            "slurm": slurm_lines(node.name, gpu_type, advised),
            "podium": podium_lines(advised),
        }
        if advised
        else {},
        "changes": sum(1 for c in answer.changes if c.changes),
    }


def _change(c: Any) -> dict[str, Any]:
    return {
        "gpu": c.gpu,
        "model": c.model,
        "now": list(c.now),
        "advised": list(c.advised),
        "changes": c.changes,
        "admits": sorted(set(c.admits)),
        "drain": [
            {
                "job_id": r.job_id,
                "device": r.device,
                "expected_end": finite(r.end_estimate),
            }
            for r in c.drain
        ],
        "ready_at": finite(c.ready_at),
    }


__all__ = ["Advice", "advice_record", "demand", "end_estimate", "finite", "gpus_now"]


def advice_now(reactor: Reactor, gpu_type: str) -> dict[str, Any]:
    """The advisor's answer for the pending queue as it is now: the running jobs, the
    queue and its last priorities are read under the reactor's lock, the advice is
    worked out after it is released."""
    with reactor.lock:
        running = reactor.running_rows()
        reactor.queue.refresh()
        pending = list(reactor.queue.jobs.values())
        last = reactor.last
        priority = {j: f.total for j, f in last.priorities.items()} if last else {}
    return advice_record(reactor.node, gpu_type, running, pending, priority, reactor.clock())
