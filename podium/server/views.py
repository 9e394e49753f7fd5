"""Read-only views of the embedded cluster as the API answers them: jobs, one job in
full, nodes, priorities (sprio), fair share (sshare) and what a caller may use.

Nothing here changes state. Callers hold the reactor's lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

from podium.api.caller import Caller, group_names
from podium.api.records import JOB_KEYS
from podium.api.selection import JobFilter
from podium.api.text import printable
from podium.errors import PermissionDenied, SpecError
from podium.jobspec.job import JobState
from podium.recover.agent import HealthAgent
from podium.recover.ladder import Health
from podium.sched.config_policy import team_rules
from podium.sched.fairshare import fairshare_table
from podium.sched.las import pending_queue
from podium.sched.model import Allocation
from podium.sched.order import las_order
from podium.sched.team_ledger import team_table
from podium.server.job_rows import (
    GpuUnits,
    display_id,
    gpu_owners,
    held_units,
    job_record,
    job_records,
    replicas_running,
    spares_step,
    step_records,
)
from podium.server.node_records import gpu_records, health_json
from podium.server.reactor import RUNNING, Reactor
from podium.server.snapshot import allocation, share_inputs
from podium.store.db import Row, brief, spec_of
from podium.store.lost_work import lost_work
from podium.store.resize_table import elastic_state
from podium.store.step_table import StepTable

PENDING = JobState.PENDING.value


class RecordCache:
    """Pending jobs' records and their JSON text, kept while their rows do not change:
    a pending job's record depends on its row alone (no elapsed time yet), so listing
    10,000 waiting jobs again costs a comparison per job, not a record and an encoding."""

    LIMIT = 200_000  # entries; past it the cache starts over

    def __init__(self, units: GpuUnits | None = None) -> None:
        self._kept: dict[int, tuple[tuple[Any, ...], dict[str, Any], str]] = {}
        self.units = units  # what parts of GPUs weigh (LocalNode.gpu_units)

    def entries(self, rows: list[Row], now: float) -> list[tuple[dict[str, Any], str]]:
        """Each row's record and its JSON text, in order."""
        if not rows:
            return []
        keys = rows[0].keys()
        job_id, state = keys.index("job_id"), keys.index("state")
        cache = self._kept
        if len(cache) > self.LIMIT:
            cache.clear()
        out = []
        for row in rows:
            values = tuple(row)
            hit = cache.get(values[job_id])
            if hit is not None and hit[0] == values:
                out.append((hit[1], hit[2]))
                continue
            record = job_record(dict(zip(keys, values, strict=True)), now, self.units)
            text = json.dumps(record)
            if values[state] == PENDING:
                cache[values[job_id]] = (values, record, text)
            out.append((record, text))
        return out


def table_json(entries: list[tuple[dict[str, Any], str]], fields: list[str]) -> str:
    """`{"fields": [...], "rows": [[...], ...]}`: only these keys of each record, a row
    a line (what a table needs: a tenth of the bytes of whole records)."""
    head = '{"fields":' + json.dumps(fields) + ',"rows":['
    if not entries:
        return head + "]}"
    return (
        head
        + "\n  "
        + ",\n  ".join(json.dumps([r[f] for f in fields]) for r, _ in entries)
        + "\n]}"
    )


def elastic_fields(row: Row) -> dict[str, Any]:
    """`show`'s elastic keys: replicas now (None unless running), the range, how often
    it was resized and each resize ({from, to, cause, time, done}); None for other
    jobs."""
    elastic = brief(row).get("elastic")
    if not isinstance(elastic, dict):
        return dict.fromkeys(("replicas", "replicas_min", "replicas_max", "resizes", "resize_log"))
    state = elastic_state(row)
    done = list(state.get("resizes") or [])
    return {
        "replicas": replicas_running(row, elastic) if row["state"] == "RUNNING" else None,
        "replicas_min": elastic.get("min"),
        "replicas_max": elastic.get("max"),
        "resizes": len(done),
        "resize_log": done + ([state["resizing"]] if state.get("resizing") else []),
    }


class Views:
    """The JSON the API returns for reads; `agent` is the node's health agent, if any."""

    def __init__(self, reactor: Reactor, agent: Callable[[], HealthAgent | None]) -> None:
        self.records = RecordCache(reactor.node.gpu_units)
        self.reactor = reactor
        self.store = reactor.store
        self.config = reactor.config
        self.node = reactor.node
        self.agent = agent

    def jobs(self, which: JobFilter) -> list[dict[str, Any]]:
        """The JobRecords of the jobs `which` selects, oldest first."""
        rows = self.store.jobs(which)
        return job_records(rows, self.reactor.clock(), self.node.gpu_units)

    def acct(self, which: JobFilter) -> list[dict[str, Any]]:
        """The jobs `which` selects that ran (or run), each with its `steps`
        (StepRecords), as sacct lists a job and then its steps."""
        found = self.store.jobs(which)
        lost = {r["job_id"]: lost_work(r) for r in found}
        by_id = {r["job_id"]: r for r in found}
        earlier = {r["job_id"]: r["earlier_gpu_seconds"] or 0.0 for r in found}
        records = job_records(found, self.reactor.clock(), self.node.gpu_units)
        jobs = [j for j in records if j["start_time"] is not None or j["end_time"]]
        steps = StepTable(self.store).of_jobs(j["job_id"] for j in jobs)
        for job in jobs:
            if job["state"] in ("RUNNING", "COMPLETING"):  # the steps so far, from its files
                live = self.reactor.effects.runs.live_steps(job["job_id"])
                for s in live:
                    s.update(node=job["node"] or "", gpus=s["gpus"] or job["gpu_ids"])
                rows: list[Any] = [
                    dict(s, step_id=str(s["step_id"]), gpu_ids=json.dumps(s["gpus"])) for s in live
                ]
            else:
                rows = steps.get(job["job_id"], [])
            job["steps"] = step_records(job, rows)
            spare = spares_step(job, brief(by_id[job["job_id"]]))
            if spare is not None:  # charged as spares: a line of their own
                job["steps"].append(spare)
                job["spare_gpu_seconds"] = spare["gpu_seconds"]
            job["lost_gpu_seconds"] = lost.get(job["job_id"], {})  # by cause
            job["gpu_seconds_all_runs"] = all_runs(job, earlier.get(job["job_id"], 0.0))
        return jobs

    def jobs_json(self, which: JobFilter, fields: list[str] | None = None) -> str:
        """`{"jobs": [...]}` as JSON text, what GET /v1/jobs answers; with `fields`
        (JobRecord keys), only those, as `table_json` rows."""
        if fields is not None:
            unknown = [f for f in fields if f not in JOB_KEYS]
            if unknown or not fields:
                raise SpecError(
                    f"fields: {unknown[0] if unknown else 'none'!r} is not a job record key; "
                    f"expected some of {', '.join(JOB_KEYS)}"
                )
        entries = self.records.entries(self.store.jobs(which), self.reactor.clock())
        if fields is not None:
            return table_json(entries, fields)
        if not entries:
            return '{"jobs":[]}'
        return '{"jobs":[\n  ' + ",\n  ".join(t for _, t in entries) + "\n]}"  # a record a line

    def show(self, job_id: int, who: Caller, task: int | None = None) -> dict[str, Any]:
        """One job in full, its script and events included: for its user and admins.
        With `task`, task `task` of array `job_id`: its own row, or, while it waits in
        its array's row, that row (as `scontrol show job 12_3` shows the array's).
        A pending job's expected start and blockers are not here: they come from the
        forecast, made without the lock (`with_forecast`)."""
        now = self.reactor.clock()
        if task is not None:
            job_id = self.store.task_row(job_id, task)["job_id"]
        row = self.store.job(job_id)
        if row["uid"] != who.uid and not who.is_admin:
            raise PermissionDenied(
                f"job {job_id} belongs to {row['user']}: its details and output are for "
                "that user and the administrators (podium queue lists every job)"
            )
        record = job_record(row, now, self.node.gpu_units)
        try:
            spec = spec_of(row)
            record["script"] = spec.script
            record["spec"] = spec.model_dump(mode="json", exclude={"environment", "script"})
        except ValueError as exc:  # pydantic's ValidationError included
            record["script"] = None
            record["spec"] = {"error": printable(f"unreadable: {exc}")[:300]}
        record["events"] = [
            {"time": e["time"], "kind": e["kind"], "detail": e["detail"]}
            for e in self.store.events(job_id)
        ]
        record.update(elastic_fields(row))
        record["replacements"] = [
            {"time": e["time"], **json.loads(e["detail"])} for e in record["events"]
            if e["kind"] == "replace" and (e["detail"] or "").startswith("{")
        ]  # fmt: skip
        if row["state"] == RUNNING:
            record.update(self.reactor.ranks.of(job_id))
        record["lost_gpu_seconds"] = lost_work(row)  # by cause: preemption, resize, fault
        record["gpu_seconds_all_runs"] = all_runs(record, row["earlier_gpu_seconds"] or 0.0)
        said = self.reactor.progress.of(job_id, row["start_time"])
        if said is not None and row["state"] == RUNNING:  # what it says of how far it is
            record["progress"] = said.record()
        return record

    def display_ids(self, job_ids: list[int]) -> list[str]:
        """The jobs' ids as users write them ("4_0" for a task of array 4), in order."""
        return [display_id(self.store.job(j)) for j in job_ids]

    def nodes(self) -> list[dict[str, Any]]:
        node = self.node
        running = self.store.jobs(JobFilter(states=(RUNNING,)))
        owner = gpu_owners(running)
        cpus_alloc = sum(r["cpus"] for r in running)
        mem_alloc = sum(r["mem_mb"] for r in running)
        node_row = self.store.node(node.name)
        health = {h.gpu: h for h in self.reactor.health.all(node.name)}
        recovery = self.config.health.recovery
        gpus = gpu_records(node, owner, health, recovery)
        used = sum(1 for g in gpus if g["job_id"] is not None or (g["share"] or {}).get("used"))
        total = len(gpus)
        node_health = health.get(None, Health(node.name, None))
        reason = node_row["reason"]
        if node_row["admin_state"] == "drain" or node_health.fenced:
            state = "draining" if running else "drained"
            if node_row["admin_state"] != "drain":
                reason = node_health.reason
        elif not running:
            state = "idle"
        elif (total and used == total) or cpus_alloc >= node.cpus:
            state = "allocated"
        else:
            state = "mixed"
        return [
            {
                "node": node.name,
                "state": state,
                "reason": reason,
                "health": health_json(node_health, recovery),
                "agent": self._agent_state(),
                "cpus_total": node.cpus,
                "cpus_alloc": cpus_alloc,
                "mem_total_mb": node.memory_mb,
                "mem_alloc_mb": mem_alloc,
                "gpus_total": total,
                "gpus_used": used,
                "gpu_type": node.gpus[0].type if node.gpus else None,
                "gpu_note": node.gpu_note,
                "features": self.config.node.features,
                "enforcement": node.enforcement,
                "partitions": [p.name for p in self.config.partitions],
                "partition_limits": {
                    p.name: {
                        "default": p is self.config.default_partition,
                        "priority_tier": p.priority_tier,
                        "max_time_s": p.max_time_s,
                    }
                    for p in self.config.partitions
                },
                "gpus": gpus,
            }
        ]

    def _agent_state(self) -> str:
        agent = self.agent()
        if agent is None:
            return "off"
        return "deep-check-in-progress" if agent.busy_deep() else "watching"

    def share(self) -> list[dict[str, Any]]:
        """Fair share per account and user, like sshare."""
        reactor = self.reactor
        now, running = self._running()
        stored = self.store.usage(now, reactor.half_life_s)
        tree, usage = share_inputs(self.config, stored, running, reactor.queue.jobs.values(), now)
        return [asdict(r) for r in fairshare_table(tree, usage)]

    def teams(self) -> list[dict[str, Any]]:
        """Each team's quota, use, borrowed and lent GPUs (podium teams)."""
        _, running = self._running()
        return team_table(team_rules(self.config), running, self.reactor.queue.jobs.values())

    def _running(self) -> tuple[float, list[Allocation]]:
        """Now, and the running jobs as the scheduler sees them (the queue refreshed)."""
        reactor, node = self.reactor, self.node
        reactor.queue.refresh()
        now = reactor.clock()
        return now, [
            allocation(r, node.name, "none", set(), now, node.gpu_units(held_units(r)))
            for r in reactor.running_rows()
        ]

    def access(self, who: Caller) -> dict[str, Any]:
        """The accounts and QoS levels `who` may submit with (admins: all of them)."""
        if who.is_admin:
            return {
                **self.config.access(who.name, ()),
                "accounts": [a.name for a in self.config.accounts] or None,
                "qos": [q.name for q in self.config.qos],
                "admin": True,
            }
        return {**self.config.access(who.name, group_names(who.name, who.gid)), "admin": False}

    def priorities(self) -> list[dict[str, Any]]:
        """Each pending job's priority factors from the last pass, like sprio, in the
        queue's order; under least attained service (which orders the queue instead)
        also its attained GPU-seconds and its queue."""
        last = self.reactor.last
        if last is None:
            return []
        jobs = self.reactor.passed.view(self.reactor.queue.jobs)
        reasons = self.reactor.pending_reasons()
        w = self.reactor.policy.weights
        weights = {"age": w.age, "fairshare": w.fairshare, "qos": w.qos, "jobsize": w.jobsize,
                   "partition": w.partition, "shortness": w.shortness}  # fmt: skip
        rules, now = self.reactor.policy.las, self.reactor.clock()
        if rules is None:
            ranked = sorted(last.priorities.items(), key=lambda kv: -kv[1].total)
        else:  # the queue's order is least attained service's
            key = las_order(list(jobs.values()), now, self.reactor.policy)
            ranked = sorted(
                (kv for kv in last.priorities.items() if kv[0] in jobs),
                key=lambda kv: key(jobs[kv[0]]),
            )
        out = []
        for job_id, f in ranked:
            job = jobs.get(job_id)
            if job is None:
                continue
            service = (
                {}
                if rules is None
                else {
                    "attained_gpu_s": round(job.attained_gpu_s, 3),
                    "las_queue": pending_queue(job, now, rules),
                    "overdue": rules.is_overdue(job, now),
                }
            )
            out.append(
                {
                    "job_id": job_id,
                    "name": job.name,
                    "user": job.user,
                    "account": job.account,
                    "qos": job.qos,
                    "partition": job.partition,
                    "priority": round(f.total, 3),
                    "age": round(f.age, 6),
                    "fairshare": round(f.fairshare, 6),
                    "qos_factor": round(f.qos, 6),
                    "jobsize": round(f.jobsize, 6),
                    "partition_factor": round(f.partition, 6),
                    "shortness": round(f.shortness, 6),
                    "nice": f.nice,
                    "held": job.held,
                    "reason": reasons.get(job_id),
                    "weights": weights,
                    "order": "multifactor" if rules is None else "las",
                    **service,
                }
            )
        return out


def all_runs(record: Mapping[str, Any], earlier: float) -> float:
    """A job's GPU-seconds over every run: its earlier runs' (requeued or resized) and
    the current or last one's (`gpu_seconds`, as sacct shows a requeued job's)."""
    return round(earlier + float(record["gpu_seconds"]), 3)
