"""What a scheduling pass sees: the pending queue kept in memory, and the Snapshot.

The pending jobs are read from the store once, then only the jobs the store reports
changed (`Store.take_changed`) are read again: a pass over 10,000 waiting jobs never
re-reads or re-parses them. Everything here runs under the reactor's lock.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from podium.api import arrays
from podium.api.states import Exclusive
from podium.config.cluster import ClusterConfig
from podium.jobspec.job import Dependency, ElasticSpec
from podium.recover.ladder import Label
from podium.sched import Allocation, GpuSlot, NodeView, PendingJob, Snapshot
from podium.sched.accounting import live_usage
from podium.sched.config_policy import share_tree
from podium.sched.fairshare import Association
from podium.sched.model import Elastic
from podium.server.job_rows import held_units
from podium.server.local_node import LocalNode
from podium.store.db import Row, Store, brief
from podium.store.health_table import HealthTable
from podium.store.resize_table import elastic_state

log = logging.getLogger("podium.snapshot")


class Unreadable(ValueError):
    """A pending job's stored fields cannot be read."""


class PendingQueue:
    """Every PENDING job as the scheduler sees it, by id, kept up to date from the
    store's changed ids. `broken` is told (once) about a job that cannot be read."""

    def __init__(
        self, store: Store, config: ClusterConfig, broken: Callable[[int, Exception], None]
    ) -> None:
        self.store = store
        self.broken = broken
        self.qos_priority = {q.name: q.priority for q in config.qos}
        self.jobs: dict[int, PendingJob] = {}
        self.arrays: set[int] = set()  # rows of pending arrays (their tasks not yet split)
        self.exclude: dict[int, frozenset[tuple[str, int]]] = {}  # (node, GPU) to avoid
        self.unreadable: set[int] = set()  # told to `broken` once, then left alone
        self._loaded = False

    def refresh(self) -> bool:
        """Bring the queue up to date; True when anything changed."""
        if not self._loaded:
            self._loaded = True
            self.store.take_changed()
            self._read(self.store.pending_brief(), replace_all=True)
            return True
        changed = self.store.take_changed()
        if not changed:
            return False
        for job_id in changed:
            self.jobs.pop(job_id, None)
            self.exclude.pop(job_id, None)
            self.arrays.discard(job_id)
        self._read(self.store.pending_brief(changed))
        return True

    def has_changes(self) -> bool:
        return not self._loaded or self.store.has_changes()

    def _read(self, rows: Iterable[Row], replace_all: bool = False) -> None:
        if replace_all:
            self.jobs, self.exclude, self.arrays = {}, {}, set()
        for row in rows:
            if row["job_id"] in self.unreadable:
                continue
            try:
                job = self._job(row)
            except (Unreadable, ValueError, TypeError, KeyError) as exc:
                self.unreadable.add(row["job_id"])
                self.broken(row["job_id"], exc)
                continue
            self.jobs[job.job_id] = job
            if row["array_pending"] is not None:
                self.arrays.add(job.job_id)
            if row["exclude"]:
                pairs = frozenset((str(n), int(g)) for n, g in json.loads(row["exclude"]))
                if pairs:
                    self.exclude[job.job_id] = pairs

    def _job(self, r: Row) -> PendingJob:
        if r["brief"] is None:
            raise Unreadable("its stored fields are missing")
        brief: dict[str, Any] = json.loads(r["brief"])
        if not isinstance(brief, dict):
            raise Unreadable("its stored fields are not an object")
        deps = tuple(Dependency.model_validate(d) for d in brief.get("dependencies") or ())
        pending = r["array_pending"]
        elastic = elastic_of(brief, r)
        sizes = (r["cpus"], r["mem_mb"], r["gpus"])
        if elastic is not None:  # the row holds its last run's size: it starts at MIN again
            gpus, cpus, mem_mb = elastic.held(elastic.min)
            sizes = (cpus, mem_mb, gpus)
        return PendingJob(
            job_id=r["job_id"],
            user=r["user"],
            name=r["name"],
            partition=r["partition"],
            qos_priority=self.qos_priority.get(r["qos"], 0),
            submit_time=r["submit_time"],
            cpus=sizes[0],
            mem_mb=sizes[1],
            gpus=sizes[2],
            gpu_type=brief.get("gpu_type"),
            exclusive=Exclusive(brief.get("exclusive") or "none"),
            nice=r["nice"],
            held=bool(r["held"]),
            held_by_admin=r["held"] == 2,
            begin_time=brief.get("begin_time"),
            dependencies=deps,
            dependency_any=bool(brief.get("dependency_any")),
            kill_on_invalid_dep=bool(brief.get("kill_on_invalid_dep")),
            array_job_id=r["array_job_id"],
            array_task_id=r["array_task_id"],
            array_throttle=r["array_throttle"],
            qos=r["qos"],
            account=r["account"],
            time_limit_s=r["time_limit_s"],
            count=arrays.count(arrays.parse(pending)) if pending is not None else 1,
            elastic=elastic,
            expedite=bool(r["expedite"]),
            attained_gpu_s=float(r["earlier_gpu_seconds"] or 0.0),
            queued_at=r["queued_at"],
            waited_s=float(r["earlier_wait_seconds"] or 0.0),
        )


def elastic_of(brief: Mapping[str, Any], row: Row) -> Elastic | None:
    """An elastic job's replicas as the scheduler reads them (None for other jobs):
    its spec's range, capped by the size a resize chose for its next start."""
    data = brief.get("elastic")
    if not isinstance(data, dict):
        return None
    spec = ElasticSpec.model_validate(data)
    cap = elastic_state(row).get("cap")
    high = max(spec.min, min(spec.max, cap)) if isinstance(cap, int) else spec.max
    return Elastic(spec.min, high, spec.step, spec.replica_gpus, spec.replica_cpus,
                   spec.replica_mem_mb, spec.spares)  # fmt: skip


def next_begin(jobs: Iterable[PendingJob], now: float) -> float | None:
    """The earliest --begin time still ahead among `jobs` (a pass is due then)."""
    times = [j.begin_time for j in jobs if j.begin_time and j.begin_time > now]
    return min(times, default=None)


def node_view(
    node: LocalNode, store: Store, health: HealthTable
) -> tuple[NodeView, set[int | None], set[tuple[str, int | None]]]:
    """The node as the scheduler sees it, the fenced GPUs (None: the node; a fenced
    GPU's MIG slices with it) and the (node, GPU) pairs not fully healthy."""
    node_row = store.node(node.name)
    rows = health.all(node.name)
    fenced: set[int | None] = {h.gpu for h in rows if h.fenced}
    fenced |= {d.index for d in node.devices if d.parent is not None and d.parent in fenced}
    unhealthy = {(h.node, h.gpu) for h in rows if h.label is not Label.SCHEDULABLE}
    view = NodeView(
        name=node.name,
        cpus=node.cpus,
        memory_mb=node.memory_mb,
        gpus=tuple(
            GpuSlot(g.index, g.type, g.parent is None, g.parent)
            for g in node.devices
            if g.index not in fenced
        ),
        schedulable=node_row["admin_state"] == "up" and None not in fenced,
        gpu_groups=node.gpu_groups,
    )
    return view, fenced, unhealthy


def allocation(
    r: Row,
    node: str,
    exclusive: str,
    fenced: set[int | None],
    now: float,
    gpu_units: float | None = None,
    checkpoint_time: float | None = None,
    expected_end: float | None = None,
    may_requeue: bool = True,
) -> Allocation:
    """What a running job's row holds, as the scheduler sees it; `gpu_units` what its
    parts of GPUs weigh in fair share (LocalNode.gpu_units); `checkpoint_time` its
    newest checkpoint's time as last sampled (what preemption would not lose);
    `expected_end` when the progress it reports says it ends (podium progress). It
    saves when told to stop (least attained service may stop it) once it has
    checkpointed, in this run or an earlier one, and `may_requeue` (a job submitted
    with --no-requeue would end, not come back)."""
    return Allocation(
        job_id=r["job_id"],
        node=r["node"] or node,
        user=r["user"],
        gpu_indices=tuple(g for g in held_units(r) if g not in fenced),
        cpus=r["cpus"],
        mem_mb=r["mem_mb"],
        exclusive=Exclusive(exclusive),
        name=r["name"],
        array_job_id=r["array_job_id"],
        array_task_id=r["array_task_id"],
        qos=r["qos"],
        account=r["account"],
        start_time=r["start_time"] or now,
        time_limit_s=r["time_limit_s"],
        preempting=r["preempt_mode"] is not None,
        gpu_units=gpu_units,
        checkpoint_time=checkpoint_time,
        elastic=elastic_of(brief(r), r),
        ending=r["ending"] is not None,
        expected_end=expected_end,
        attained_gpu_s=float(r["earlier_gpu_seconds"] or 0.0),
        saves=may_requeue and (checkpoint_time is not None or r["checkpoint_mtime"] is not None),
        waited_s=waited_before_run(r, now),
    )


def waited_before_run(r: Row, now: float) -> float:
    """Seconds a running job's row says it waited before its current run: its earlier
    stays' waits and this stay's (from its requeue, else its submission, to its start)."""
    joined = float(r["queued_at"] if r["queued_at"] is not None else r["submit_time"])
    start = float(r["start_time"] if r["start_time"] is not None else now)
    return float(r["earlier_wait_seconds"] or 0.0) + max(0.0, start - joined)


def build_snapshot(
    pending: list[PendingJob],
    exclude: dict[int, frozenset[tuple[str, int]]],
    view: NodeView,
    running: tuple[Allocation, ...],
    unhealthy: set[tuple[str, int | None]],
    config: ClusterConfig,
    fairshare: dict[tuple[str, str], float],
    job_states: dict[int, str],
    array_members: dict[int, tuple[int, ...]],
) -> Snapshot:
    """The scheduler's view. A job avoids a (node, GPU) it failed on only while that
    GPU is not healthy. Pure: no store, no lock needed."""
    if exclude:
        for i, job in enumerate(pending):
            avoid = exclude.get(job.job_id)
            if avoid:
                kept = frozenset(p for p in avoid if p in unhealthy)
                pending[i] = dataclasses.replace(job, avoid_gpus=kept)
    return Snapshot(
        nodes=(view,),
        running=running,
        pending=tuple(pending),
        job_states=job_states,
        array_members=array_members,
        fairshare=fairshare,
        partition_nodes={p.name: tuple(p.nodes) for p in config.partitions if p.nodes},
    )


def share_inputs(
    config: ClusterConfig,
    usage: dict[tuple[str, str], float],
    running: Iterable[Allocation],
    pending: Iterable[PendingJob],
    now: float,
) -> tuple[Association, dict[tuple[str, str], float]]:
    """The fair-share tree and usage now: decayed stored `usage` (Store.usage) plus
    what running jobs have used so far. `usage` is not changed."""
    usage = live_usage(usage, running, now, config.fairshare.cpu_weight)
    seen = set(usage) | {(p.account, p.user) for p in pending}
    return share_tree(config, seen), usage
