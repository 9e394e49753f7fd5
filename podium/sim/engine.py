"""Replay a trace on a virtual clock through `podium.sched.schedule`, unchanged.

Events are arrivals and completions; after the events of one instant, one scheduling
pass runs (again while it preempts, so freed GPUs are used at once). A preempted job
loses the work done since its last checkpoint (`checkpoint_interval_s`; 0 means it
loses nothing) and is requeued with its remaining work. A job asking for more GPUs
than the largest node has is a multi-node gang job: `gang_shape` spreads it evenly
over as few nodes as hold it, and all its nodes start together. Jobs that fit no set
of nodes are reported as unschedulable and not replayed.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

from podium.sched import Allocation, PendingJob, Snapshot, schedule
from podium.sched.accounting import (
    UsageLedger,
    allocation_usage,
    live_usage,
    requeued_after_preemption,
    share_tree,
)
from podium.sched.fairshare import Association, user_factors
from podium.sched.fit import could_ever_fit
from podium.sched.model import Policy, TeamRules
from podium.sched.order import PendingGroups
from podium.sched.priority import PriorityWeights
from podium.sim.sharing import plan
from podium.sim.traces import TraceJob, TraceNode

QOS_PRIORITY = {"high": 1000, "normal": 100, "low": 10}
NO_FAIRSHARE = PriorityWeights(fairshare=0.0)
WITH_FAIRSHARE = PriorityWeights(fairshare=100000.0, qos=100000.0)
PREEMPTS = {"high": frozenset({"low"})}

POLICIES: dict[str, Policy] = {
    "fifo": Policy(use_priority=False, backfill=False, preemption=False),
    "fifo-backfill": Policy(use_priority=False, backfill=True, preemption=False),
    "priority": Policy(backfill=False, preemption=False, weights=NO_FAIRSHARE),
    "backfill": Policy(backfill=True, preemption=False, weights=NO_FAIRSHARE),
    "preempt": Policy(backfill=True, preemption=True, weights=NO_FAIRSHARE, preempts=PREEMPTS),
    "fairshare": Policy(backfill=True, preemption=True, weights=WITH_FAIRSHARE, preempts=PREEMPTS),
}


@dataclass(frozen=True)
class SimOptions:
    """`pass_interval_s` > 0 runs at most one scheduling pass per interval (like Slurm's
    sched_min_interval), instead of one after every event."""

    checkpoint_interval_s: float = 600.0
    time_limit_factor: float = 1.0
    fairshare_half_life_s: float = 7 * 86400.0
    pass_interval_s: float = 0.0
    sharing: str = "whole"  # how fractional GPU requests are served (podium.sim.sharing)
    mps_units: int = 10  # per shared GPU: 10 % steps (100 slows the replay ten-fold)
    teams: TeamRules = field(default_factory=TeamRules)  # team quotas (none: no quotas)


@dataclass
class JobOutcome:
    """What happened to one job."""

    job: TraceJob
    first_start: float | None = None
    end: float | None = None
    gpu_seconds: float = 0.0
    lost_seconds: float = 0.0
    preemptions: int = 0
    contenders_at_arrival: int = 1


@dataclass
class SimResult:
    policy: str
    outcomes: list[JobOutcome]
    unschedulable: list[TraceJob]
    total_gpus: int
    preemptions: int
    passes: int = 0


@dataclass
class _Run:
    allocs: list[Allocation]
    token: int
    started: float


@dataclass
class _State:
    remaining: dict[int, float] = field(default_factory=dict)
    tokens: dict[int, int] = field(default_factory=dict)


def gang_shape(job: TraceJob, node_gpus: int) -> tuple[int, int, int, int]:
    """(nodes, GPUs, CPUs, MiB per node) for `job` on nodes of `node_gpus` GPUs: one
    node when it fits one, else the fewest nodes that hold its GPUs, shared evenly
    (rounded up, as Slurm's --gpus-per-node would be given)."""
    if job.gpus <= node_gpus or node_gpus == 0:
        return 1, job.gpus, job.cpus, job.mem_mb
    count = -(-job.gpus // node_gpus)
    return count, -(-job.gpus // count), -(-job.cpus // count), -(-job.mem_mb // count)


def _fits_somewhere(job: TraceJob, nodes: list[TraceNode]) -> bool:
    count, gpus, cpus, mem = gang_shape(job, max((n.gpus for n in nodes), default=0))
    fitting = sum(1 for n in nodes if gpus <= n.gpus and cpus <= n.cpus and mem <= n.mem_mb)
    return fitting >= count


def simulate(
    trace: list[TraceJob], nodes: list[TraceNode], policy_name: str, options: SimOptions
) -> SimResult:
    """Replay `trace` on `nodes` under the named policy (see POLICIES)."""
    policy = replace(POLICIES[policy_name], teams=options.teams)
    sharing = plan(trace, nodes, options.sharing, options.mps_units)
    views = tuple(sharing.view(n) for n in nodes)
    # whole GPUs per node (fewer where some are shared): what gangs are shaped on
    whole = [
        replace(n, gpus=sum(1 for g in v.gpus if g.whole))
        for n, v in zip(nodes, views, strict=True)
    ]

    def fits(j: TraceJob) -> bool:
        kind, count, _ = sharing.request(j)
        if kind is None:
            return _fits_somewhere(replace(j, gpus=count), whole)
        one = PendingJob(j.job_id, j.user, "", "main", 0, 0.0, j.cpus, j.mem_mb, count, kind)
        return any(could_ever_fit(one, v) for v in views)

    runnable = [j for j in trace if fits(j)]
    unschedulable = [j for j in trace if not fits(j)]
    outcomes = {j.job_id: JobOutcome(j) for j in runnable}
    by_id = {j.job_id: j for j in runnable}
    pending_jobs: dict[int, PendingJob] = {}
    groups = PendingGroups()  # the same jobs, grouped for a lazy walk of the queue
    running: dict[int, _Run] = {}
    state = _State({j.job_id: j.duration for j in runnable}, {j.job_id: 0 for j in runnable})
    ledger = UsageLedger(options.fairshare_half_life_s)  # charged as the daemon charges
    events: list[tuple[float, int, int, int]] = []  # (time, kind 0=finish 1=arrive, id, token)
    for j in runnable:
        heapq.heappush(events, (j.submit_time, 1, j.job_id, 0))
    preemptions = passes = 0
    next_pass = 0.0
    wake_pending = False

    node_gpus = max((n.gpus for n in whole), default=0)
    shares: dict[int, float] = {}  # job -> GPUs it holds (parts of a GPU by their share)
    tree_of: tuple[set[tuple[str, str]], Association] = (set(), Association("root"))
    cpu_weight = 0.0  # fair share charges GPU-seconds only, the daemon's default

    def pending_of(j: TraceJob) -> PendingJob:
        limit = j.time_limit if j.time_limit is not None else j.duration * options.time_limit_factor
        kind, asked, share = sharing.request(j)
        shares[j.job_id] = share
        if kind is None:
            count, gpus, cpus, mem_mb = gang_shape(replace(j, gpus=asked), node_gpus)
        else:  # part of one GPU: one node
            count, gpus, cpus, mem_mb = 1, asked, j.cpus, j.mem_mb
        return PendingJob(
            job_id=j.job_id,
            user=j.user,
            name=str(j.job_id),
            partition="main",
            qos_priority=QOS_PRIORITY.get(j.qos, 100),
            submit_time=j.submit_time,
            cpus=cpus,
            mem_mb=mem_mb,
            gpus=gpus,
            gpu_type=kind,
            nodes=count,
            qos=j.qos,
            account=j.account,
            time_limit_s=max(1.0, limit),
        )

    def end_run(job_id: int, now: float) -> _Run:
        """A run stops: its usage is charged (as RunEnds charges it) and it leaves."""
        run = running.pop(job_id)
        j = by_id[job_id]
        used = sum(allocation_usage(a, now, cpu_weight) for a in run.allocs)
        ledger.charge((j.account, j.user), used, now)
        outcomes[job_id].gpu_seconds += (now - run.started) * shares[job_id]
        return run

    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, kind, job_id, token = heapq.heappop(events)
            if kind == 2:
                wake_pending = False
            elif kind == 1:
                pending_jobs[job_id] = p = pending_of(by_id[job_id])
                groups.add(p)
                outcomes[job_id].contenders_at_arrival = len(pending_jobs) + len(running)
            elif job_id in running and running[job_id].token == token:
                end_run(job_id, now)
                outcomes[job_id].end = now
        if not pending_jobs:
            continue
        if now < next_pass:
            if not wake_pending:
                heapq.heappush(events, (next_pass, 2, -1, 0))
                wake_pending = True
            continue
        next_pass = now + options.pass_interval_s
        while True:
            fairshare: dict[tuple[str, str], float] = {}
            if policy.use_priority and policy.weights.fairshare > 0:
                seen = ledger.keys() | {
                    (g.jobs[0].account, g.jobs[0].user) for g in groups.groups.values()
                }
                if seen != tree_of[0]:  # the tree changes only when a new user shows up
                    tree_of = (seen, share_tree({}, {}, sorted(seen)))
                live = live_usage(
                    ledger.at(now), (a for r in running.values() for a in r.allocs), now, cpu_weight
                )
                fairshare = user_factors(tree_of[1], live)
            snap = Snapshot(
                nodes=views,
                running=tuple(a for r in running.values() for a in r.allocs),
                pending=tuple(pending_jobs.values()),
                fairshare=fairshare,
                groups=list(groups.groups.values()),
            )
            decisions = schedule(snap, now, policy, explain=False)
            passes += 1
            for pre in decisions.preempts:
                run = end_run(pre.job_id, now)
                out = outcomes[pre.job_id]
                done = now - run.started
                interval = options.checkpoint_interval_s
                kept = done if interval <= 0 else (done // interval) * interval
                state.remaining[pre.job_id] -= kept
                out.lost_seconds += done - kept
                out.preemptions += 1
                preemptions += 1
                if requeued_after_preemption(pre.mode, may_requeue=True):
                    pending_jobs[pre.job_id] = p = pending_of(by_id[pre.job_id])
                    groups.add(p)
                else:
                    out.end = now
            for s in decisions.starts:
                p = pending_jobs.pop(s.job_id)
                groups.remove(p)
                token = state.tokens[s.job_id] + 1
                state.tokens[s.job_id] = token
                allocs = [p.allocate(node, gpus, now) for node, gpus in s.placements]
                if p.gpu_type is not None:  # parts of a GPU: charged by their share
                    allocs = [replace(a, gpu_units=shares[s.job_id]) for a in allocs]
                running[s.job_id] = _Run(allocs, token, now)
                out = outcomes[s.job_id]
                if out.first_start is None:
                    out.first_start = now
                heapq.heappush(events, (now + state.remaining[s.job_id], 0, s.job_id, token))
            if not decisions.preempts:
                break
    return SimResult(
        policy_name,
        list(outcomes.values()),
        unschedulable,
        sum(n.gpus for n in nodes),
        preemptions,
        passes,
    )


def uniform_nodes(
    count: int, gpus: int, cpus: int, mem_mb: int, gpu_type: str = "gpu"
) -> list[TraceNode]:
    """`count` identical nodes."""
    return [TraceNode(f"node{i:04d}", gpus, cpus, mem_mb, gpu_type) for i in range(count)]


__all__ = ["POLICIES", "SimOptions", "SimResult", "simulate", "uniform_nodes"]
