"""/metrics: the cluster in Prometheus' text format, by the official client library.

Names follow Slurm 25.11's OpenMetrics plugin where Slurm has one (slurm_jobs_pending,
slurm_nodes_idle, slurm_partition_jobs_running, slurm_user_jobs_gpus_alloc,
slurm_schedule_cycle_last ...), dcgm-exporter's for GPU telemetry (DCGM_FI_DEV_GPU_UTIL
... with gpu, UUID, device, modelName and Hostname labels; from NVML where it answers,
left out where it does not), and podium_* for the rest: jobs by QoS and pending reason,
the submit->start wait, requeues and resizes by cause, goodput and lost work, which job
holds each GPU and each GPU's health.

A scrape reads the store and the node once under the daemon's lock (no spec is
decoded), then builds every family outside it, so it never holds up a pass for longer
than those reads. Ended jobs count for MIN_JOB_AGE_S after their end, as Slurm keeps
them in memory for MinJobAge (300 s by default)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from podium.server.controller import Controller
from podium.server.http.training_metrics import progress_families, rank_families
from podium.store.lost_work import lost_work
from podium.store.metric_reads import GROUP_COLUMNS

MIN_JOB_AGE_S = 300.0
WAIT_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0)
# Slurm's job state metric names (slurm_jobs_<word>) for Podium's states.
STATE_WORDS = {
    "PENDING": "pending",
    "RUNNING": "running",
    "COMPLETED": "completed",
    "CANCELLED": "cancelled",
    "FAILED": "failed",
    "TIMEOUT": "timeout",
    "NODE_FAIL": "node_failed",
    "OUT_OF_MEMORY": "outofmemory",
    "PREEMPTED": "preempted",
}
ACTIVE_WORDS = ("pending", "running")
REQUEUE_CAUSES = ("preempted", "node_fail", "failed", "timeout", "out_of_memory")


def _gauge(name: str, doc: str, value: float, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    if not labels:
        family.add_metric([], value)
    return family


class ClusterCollector(Collector):
    """Builds every family from one read of the daemon's state per scrape.
    `telemetry(indices)` reads the GPUs' NVML values ({} on declared GPUs)."""

    def __init__(
        self, controller: Controller, telemetry: Callable[[list[int]], dict[int, dict[str, float]]]
    ) -> None:
        self.controller = controller
        self.telemetry = telemetry

    def collect(self) -> Iterator[Metric]:
        c = self.controller
        with c.lock:
            now = c.clock()
            store = c.reactor.store
            since = now - MIN_JOB_AGE_S
            counts = JobCounts(
                store.job_counts(since), store.pending_reasons(), store.running_jobs()
            )
            waits = store.wait_buckets(WAIT_BUCKETS)
            charged = store.lost_and_charged()
            events = store.event_details(("requeue", "resize", "relaunch"))
            nodes = c.views.nodes()
            units = c.reactor.node.gpu_units
            said = [
                (j, c.reactor.progress.of(j["job_id"], j["start_time"])) for j in counts.running
            ]
            ranks = dict(c.reactor.ranks.seconds)
            stragglers = {j: s.rank for j, s in c.reactor.ranks.stragglers.items()}
        passes = c.reactor.pass_stats.snapshot()
        partitions = [p.name for p in c.config.partitions]
        yield from _job_families(counts, partitions)
        yield from _node_families(nodes)
        yield from _scheduler_families(passes)
        yield from _forecast_families(c.forecasts.made_count, c.forecasts.last_cost)
        yield from _wait_and_cause_families(waits, events)
        yield from _goodput_families(charged, counts.running, now, units)
        yield from progress_families([(j, p) for j, p in said if p is not None])
        users = {j["job_id"]: j["user"] for j in counts.running}
        yield from rank_families(ranks, stragglers, users)
        real = [g["index"] for n in nodes for g in n["gpus"] if g["parent"] is None]
        yield from _gpu_families(nodes, users, self.telemetry(real) if real else {})


@dataclass(frozen=True)
class JobCounts:
    """What the store summed of the jobs for one scrape."""

    rows: list[tuple[Any, ...]]  # partition, user, account, qos, state, held, ending, jobs
    reasons: list[tuple[str, int]]
    running: list[Any]  # the running jobs' rows


def _job_families(counts: JobCounts, partitions: Sequence[str]) -> Iterator[Metric]:
    by_state: Counter[str] = Counter()
    held = completing = total = 0
    for *_, state, is_held, ending, jobs in counts.rows:
        word = STATE_WORDS.get(state)
        if word is None:
            continue
        total += jobs
        by_state[word] += jobs
        held += jobs if state == "PENDING" and is_held else 0
        completing += jobs if state == "RUNNING" and ending else 0
    gpus_of = {j["job_id"]: len(json.loads(j["gpu_ids"] or "[]")) for j in counts.running}
    alloc = {
        "cpus": sum(j["cpus"] for j in counts.running),
        "gpus": sum(gpus_of.values()),
        "memory": sum(j["mem_mb"] for j in counts.running) * 1024 * 1024,
        "nodes": len(counts.running),
    }
    yield _gauge("slurm_jobs", "Jobs pending, running, or ended in the last MinJobAge", total)
    for word in sorted(set(STATE_WORDS.values())):
        yield _gauge(f"slurm_jobs_{word}", f"Jobs in state {word}", by_state[word])
    yield _gauge("slurm_jobs_completing", "Running jobs being stopped", completing)
    yield _gauge("slurm_jobs_hold", "Pending jobs held", held)
    for what, doc in (("cpus", "CPUs"), ("gpus", "GPUs"), ("nodes", "Nodes")):
        yield _gauge(f"slurm_jobs_{what}_alloc", f"{doc} allocated to running jobs", alloc[what])
    yield _gauge("slurm_jobs_memory_alloc", "Memory allocated to running jobs (bytes)",
                 alloc["memory"])  # fmt: skip
    yield _gauge("slurm_partitions", "Partitions", len(partitions))
    for key, prefix, label in (
        ("partition", "slurm_partition_jobs", "partition"),
        ("user", "slurm_user_jobs", "username"),
        ("account", "slurm_account_jobs", "account"),
        ("qos", "podium_qos_jobs", "qos"),
    ):
        grouped: dict[str, Counter[str]] = {}
        if key == "partition":
            grouped = {name: Counter() for name in partitions}
        column = GROUP_COLUMNS.index(key)
        for row in counts.rows:
            value, state, jobs = str(row[column]), row[4], row[7]
            counter = grouped.setdefault(value, Counter())
            counter["jobs"] += jobs
            counter[STATE_WORDS.get(state, "other")] += jobs
        for job in counts.running:
            grouped.setdefault(str(job[key]), Counter())["gpus_alloc"] += gpus_of[job["job_id"]]
        for suffix in ("", *(f"_{w}" for w in ACTIVE_WORDS), "_gpus_alloc"):
            doc = f"Jobs by {key}{suffix}"
            family = GaugeMetricFamily(f"{prefix}{suffix}", doc, labels=[label])
            for name, counter in sorted(grouped.items()):
                family.add_metric([name], counter[suffix.lstrip("_") or "jobs"])
            yield family
    reasons: Counter[str] = Counter()
    for reason, jobs in counts.reasons:
        reasons[reason.split(":")[0].strip() or "None"] += jobs
    family = GaugeMetricFamily(
        "podium_jobs_pending_reason", "Pending jobs by reason (Slurm's words)", labels=["reason"]
    )
    for reason, jobs in sorted(reasons.items()):
        family.add_metric([reason], jobs)
    yield family


def _node_families(nodes: Sequence[Mapping[str, Any]]) -> Iterator[Metric]:
    states = Counter(str(n["state"]) for n in nodes)
    yield _gauge("slurm_nodes", "Nodes", len(nodes))
    for name, words in (
        ("idle", ("idle",)),
        ("alloc", ("allocated",)),
        ("mixed", ("mixed",)),
        ("drain", ("drained", "draining")),
        ("drained", ("drained",)),
        ("draining", ("draining",)),
        ("down", ("down",)),
    ):
        yield _gauge(f"slurm_nodes_{name}", f"Nodes {name}", sum(states[w] for w in words))
    per_node: tuple[tuple[str, str, Callable[[Mapping[str, Any]], float]], ...] = (
        ("slurm_node_cpus", "CPUs of the node", lambda n: n["cpus_total"]),
        ("slurm_node_cpus_alloc", "CPUs allocated", lambda n: n["cpus_alloc"]),
        ("slurm_node_cpus_idle", "CPUs idle", lambda n: n["cpus_total"] - n["cpus_alloc"]),
        ("slurm_node_gpus", "GPUs of the node", lambda n: n["gpus_total"]),
        ("slurm_node_gpus_alloc", "GPUs allocated", lambda n: n["gpus_used"]),
        ("slurm_node_memory_bytes", "Memory", lambda n: n["mem_total_mb"] * 1024 * 1024),
        ("slurm_node_memory_alloc_bytes", "Memory allocated",
         lambda n: n["mem_alloc_mb"] * 1024 * 1024),
    )  # fmt: skip
    for name, doc, value in per_node:
        family = GaugeMetricFamily(name, doc, labels=["node"])
        for node in nodes:
            family.add_metric([node["node"]], value(node))
        yield family


def _scheduler_families(passes: Mapping[str, Any]) -> Iterator[Metric]:
    yield _gauge("slurm_schedule_cycle_last", "Last scheduling pass (microseconds)",
                 passes["last_us"])  # fmt: skip
    yield _gauge("slurm_schedule_cycle_max", "Longest scheduling pass (microseconds)",
                 passes["max_us"])  # fmt: skip
    yield _gauge("slurm_schedule_cycle_tot", "All scheduling passes (microseconds)",
                 passes["total_us"])  # fmt: skip
    yield _gauge("slurm_schedule_cycle_cnt", "Scheduling passes since start", passes["count"])
    yield _gauge("slurm_schedule_queue_len", "Pending jobs the last pass read",
                 passes["queue_len"])  # fmt: skip
    if passes["last_when"] is not None:
        yield _gauge("podium_schedule_cycle_last_timestamp_seconds", "When the last pass ended",
                     passes["last_when"])  # fmt: skip


def _forecast_families(made: int, last_cost: float | None) -> Iterator[Metric]:
    yield CounterMetricFamily("podium_forecasts", "Forecasts of expected starts made (each "
                              "is shared by every request until the cluster changes)",
                              value=made)  # fmt: skip
    if last_cost is not None:
        yield _gauge("podium_forecast_last_seconds", "What the last forecast cost", last_cost)


def _cause(kind: str, detail: str) -> str:
    """A short cause of a requeue ("preempted", "node_fail", "failed" ...) or a resize
    ("shrink", "grow")."""
    if kind == "relaunch":  # a start whose supervisor never ran, launched again
        return kind
    word = re.match(r"[A-Za-z_]+", detail)
    return word[0].lower() if word else kind


def _wait_and_cause_families(
    waits: tuple[list[int], int, float], events: Sequence[tuple[str, str, int]]
) -> Iterator[Metric]:
    under, started, total = waits
    buckets = [(repr(bound), n) for bound, n in zip(WAIT_BUCKETS, under, strict=True)]
    buckets.append(("+Inf", started))
    yield HistogramMetricFamily(
        "podium_job_wait_seconds", "Submit to start, of the jobs that started",
        buckets=buckets, sum_value=total,
    )  # fmt: skip
    causes: dict[str, Counter[str]] = {  # the usual causes at 0, so the series exist
        "requeue": Counter(dict.fromkeys(REQUEUE_CAUSES, 0)),
        "resize": Counter(dict.fromkeys(("shrink", "grow"), 0)),
    }
    for kind, detail, count in events:
        target = "requeue" if kind in ("requeue", "relaunch") else "resize"
        causes[target][_cause(kind, detail)] += count
    for target, doc in (("requeue", "Jobs requeued, by cause"), ("resize", "Resizes, by cause")):
        family = CounterMetricFamily(f"podium_{target}s", doc, labels=["cause"])
        for cause, count in sorted(causes[target].items()):
            family.add_metric([cause], count)
        yield family


def _goodput_families(
    charged: Sequence[Any], running: Sequence[Any], now: float, units: Callable[[list[int]], Any]
) -> Iterator[Metric]:
    def run_gpu_seconds(row: Any) -> float:
        if row["start_time"] is None or not row["gpu_ids"]:
            return 0.0
        ids = json.loads(row["gpu_ids"])
        weight = units(ids)
        end = row["end_time"] if row["end_time"] is not None else now
        gpus = float(len(ids) if weight is None else weight)
        return gpus * max(0.0, float(end) - float(row["start_time"]))

    total_charged, lost_by_cause = 0.0, Counter[str]()
    for row in charged:
        total_charged += (row["earlier_gpu_seconds"] or 0.0) + run_gpu_seconds(row)
        lost_by_cause.update(lost_work(row))
    yield CounterMetricFamily("podium_gpu_seconds", "GPU-seconds charged, every run",
                              value=total_charged)  # fmt: skip
    family = CounterMetricFamily(
        "podium_lost_gpu_seconds", "GPU-seconds lost since a checkpoint, by cause",
        labels=["cause"],
    )  # fmt: skip
    for cause in ("preemption", "resize", "fault"):
        family.add_metric([cause], lost_by_cause.get(cause, 0.0))
    yield family
    if total_charged > 0:
        useful = max(0.0, total_charged - sum(lost_by_cause.values()))
        yield _gauge("podium_goodput_ratio", "Useful over charged GPU-seconds, all jobs",
                     useful / total_charged)  # fmt: skip
    per_job = GaugeMetricFamily(
        "podium_job_goodput_ratio", "A running job's useful over charged GPU-seconds",
        labels=["job_id", "user"],
    )  # fmt: skip
    seconds = GaugeMetricFamily(
        "podium_job_gpu_seconds",
        "A running job's GPU-seconds, every run",
        labels=["job_id", "user"],
    )
    for job in running:
        spent = (job["earlier_gpu_seconds"] or 0.0) + run_gpu_seconds(job)
        seconds.add_metric([str(job["job_id"]), job["user"]], spent)
        if spent > 0:
            lost = sum(lost_work(job).values())
            per_job.add_metric([str(job["job_id"]), job["user"]], max(0.0, spent - lost) / spent)
    yield seconds
    yield per_job


def _gpu_families(
    nodes: Sequence[Mapping[str, Any]],
    users: Mapping[int, str],
    telemetry: Mapping[int, Mapping[str, float]],
) -> Iterator[Metric]:
    labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
    holder = GaugeMetricFamily("podium_gpu_job", "The job holding each GPU (1)",
                               labels=[*labels, "job_id", "user"])  # fmt: skip
    health = GaugeMetricFamily("podium_gpu_health", "Each GPU's health state (1)",
                               labels=[*labels, "state", "reason"])  # fmt: skip
    xid = GaugeMetricFamily("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error seen",
                            labels=labels)  # fmt: skip
    fields: dict[str, GaugeMetricFamily] = {}
    for node in nodes:
        for gpu in node["gpus"]:
            index = gpu["index"]
            device = f"nvidia{index}" if gpu["parent"] is None else f"mig{index}"
            values = [str(index), gpu["uuid"] or "", device, gpu["type"] or "", node["node"]]
            owners = (gpu["share"] or {}).get("jobs") or (
                [gpu["job_id"]] if gpu["job_id"] is not None else []
            )
            for job_id in owners:
                holder.add_metric([*values, str(job_id), users.get(job_id, "")], 1)
            h = gpu["health"]
            health.add_metric([*values, h["label"], h["reason"] or ""], 1)
            code = re.fullmatch(r"xid-(\d+)", h["fault"] or "")
            xid.add_metric(values, int(code[1]) if code else 0)
            for field, value in (telemetry.get(index) or {}).items():
                family = fields.setdefault(field, GaugeMetricFamily(field, field, labels=labels))
                family.add_metric(values, value)
    yield holder
    yield health
    yield xid
    yield from fields.values()


def add_metrics_route(app: FastAPI, registry: CollectorRegistry) -> None:
    """GET /metrics on `app`: the registry in Prometheus' text format. It runs on the
    API's thread pool, so a scrape never waits on the event loop."""

    @app.get("/metrics", response_class=PlainTextResponse)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


def metrics_registry(
    controller: Controller, telemetry: Callable[[list[int]], dict[int, dict[str, float]]]
) -> CollectorRegistry:
    """A registry holding only the cluster collector (no process or platform metrics
    of the client library: they describe Python, not the cluster)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(controller, telemetry))
    return registry


__all__ = ["MIN_JOB_AGE_S", "ClusterCollector", "add_metrics_route", "metrics_registry"]
