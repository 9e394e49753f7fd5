"""Replay a trace on a virtual clock through `podium.sched.schedule`, unchanged.

Events are arrivals and completions; after the events of one instant, one scheduling
pass runs (again while it preempts, so freed GPUs are used at once). A preempted job
loses the work done since its last checkpoint (`checkpoint_interval_s`; 0 means it
loses nothing) and is requeued with its remaining work. A share of the jobs may be
elastic (`podium.sim.elastic_replay`): the scheduler's resizes stop them and start
them again at the new size, keeping their work; every restart costs
`restart_cost_s` of no progress. A job asking for more GPUs
than the largest node has is a multi-node gang job: `gang_shape` spreads it evenly
over as few nodes as hold it, and all its nodes start together. Jobs that fit no set
of nodes are reported as unschedulable and not replayed.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from podium.sched import Allocation, PendingJob, Snapshot, schedule
from podium.sched.accounting import (
    UsageLedger,
    allocation_usage,
    live_usage,
    requeued_after_preemption,
    share_tree,
)
from podium.sched.elastic import next_change
from podium.sched.fairshare import Association, user_factors
from podium.sched.fit import could_ever_fit
from podium.sched.model import Policy, TeamRules
from podium.sched.order import PendingGroups, orders_by_limit
from podium.sched.priority import PriorityWeights
from podium.sim.elastic_replay import elastic_of, is_elastic, picked, with_checkpoint
from podium.sim.sharing import plan
from podium.sim.traces import TraceJob, TraceNode

QOS_PRIORITY = {"high": 1000, "normal": 100, "low": 10}
NO_FAIRSHARE = PriorityWeights(fairshare=0.0)
WITH_FAIRSHARE = PriorityWeights(fairshare=100000.0, qos=100000.0)
PREEMPTS = {"high": frozenset({"low"})}
# least requested GPU-time first, by levels, and any job pending a day counts as the
# shortest (docs/scheduling.md: `weight_shortness: 10000`, `starve_after: 1-0`)
SHORTEST_FIRST = PriorityWeights(fairshare=0.0, shortness=10000.0, starve_after_s=86400.0)

POLICIES: dict[str, Policy] = {
    "fifo": Policy(use_priority=False, backfill=False, preemption=False),
    "fifo-backfill": Policy(use_priority=False, backfill=True, preemption=False),
    "priority": Policy(backfill=False, preemption=False, weights=NO_FAIRSHARE),
    "backfill": Policy(backfill=True, preemption=False, weights=NO_FAIRSHARE),
    "preempt": Policy(backfill=True, preemption=True, weights=NO_FAIRSHARE, preempts=PREEMPTS),
    "fairshare": Policy(backfill=True, preemption=True, weights=WITH_FAIRSHARE, preempts=PREEMPTS),
    "shortest-first": Policy(backfill=True, preemption=False, weights=SHORTEST_FIRST),
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
    elastic_share: float = 0.0  # of the jobs of 2 to a node's GPUs: elastic (elastic_replay)
    elastic_mode: str = "shrink"  # requeue, shrink or shrink-ckpt (elastic_replay.MODES)
    restart_cost_s: float = 0.0  # no progress after each restart (requeue or resize)
    # running jobs report their progress at a steady rate (podium progress): a run's end
    # is known this long after it starts (None: no job reports, ends are the limits')
    progress_after_s: float | None = None


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
    elastic: bool = False  # one of the jobs picked to be elastic (also in `requeue`)
    resizes: int = 0


@dataclass
class SimResult:
    policy: str
    outcomes: list[JobOutcome]
    unschedulable: list[TraceJob]
    total_gpus: int
    preemptions: int
    passes: int = 0
    resizes: int = 0


@dataclass
class _Run:
    allocs: list[Allocation]
    token: int
    started: float
    overhead: float = 0.0  # seconds of restart before it makes progress
    replicas: int = 0  # an elastic run's size (0: not elastic)
    end: float = math.inf  # when it ends in the replay

    def progress(self, now: float) -> float:
        """Seconds of progress it made by `now`."""
        return max(0.0, now - self.started - self.overhead)


@dataclass
class _State:
    remaining: dict[int, float] = field(default_factory=dict)  # elastic: replica-seconds
    tokens: dict[int, int] = field(default_factory=dict)
    caps: dict[int, int] = field(default_factory=dict)  # elastic job -> its next size at most


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
    trace: list[TraceJob],
    nodes: list[TraceNode],
    policy_name: str,
    options: SimOptions,
    on_arrival: Callable[[Snapshot, float, list[int]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Replay `trace` on `nodes` under the named policy (see POLICIES). With
    `on_arrival`, after the arrivals of each instant and before its pass, it is called
    with the snapshot a pass would read then, the time and the arrived job ids (what a
    forecast at submission sees: `podium.sim.forecast_error`). With `on_progress`, it is
    called with the jobs finished so far and the jobs replayed, at each instant that
    finished one (what a long replay shows on the terminal)."""
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
    groups = PendingGroups(orders_by_limit(policy))  # grouped for a lazy walk of the queue
    running: dict[int, _Run] = {}
    node_gpus = max((n.gpus for n in whole), default=0)
    share, mode = options.elastic_share, options.elastic_mode
    elastic = {j.job_id for j in runnable if is_elastic(j, share, mode, node_gpus)}
    for j in runnable:
        outcomes[j.job_id].elastic = picked(j, share, node_gpus)
    state = _State(
        {j.job_id: j.duration * (j.gpus if j.job_id in elastic else 1) for j in runnable},
        {j.job_id: 0 for j in runnable},
    )
    with_checkpoints = mode == "shrink-ckpt" and share > 0
    wakes: set[float] = set()  # passes due when an elastic job may grow or be shrunk
    ended = False  # a job ended at this instant
    ledger = UsageLedger(options.fairshare_half_life_s)  # charged as the daemon charges
    events: list[tuple[float, int, int, int]] = []  # (time, kind 0=finish 1=arrive, id, token)
    for j in runnable:
        heapq.heappush(events, (j.submit_time, 1, j.job_id, 0))
    preemptions = passes = resizes = 0
    next_pass = 0.0
    wake_pending = False

    shares: dict[int, float] = {}  # job -> GPUs it holds (parts of a GPU by their share)
    tree_of: tuple[set[tuple[str, str]], Association] = (set(), Association("root"))
    cpu_weight = 0.0  # fair share charges GPU-seconds only, the daemon's default

    def pending_of(j: TraceJob) -> PendingJob:
        limit = j.time_limit if j.time_limit is not None else j.duration * options.time_limit_factor
        kind, asked, part = sharing.request(j)
        shares[j.job_id] = part
        if j.job_id in elastic:
            e = elastic_of(j, state.caps.get(j.job_id))
            count, gpus, cpus, mem_mb = 1, e.min * e.gpus, e.min * e.cpus, e.min * e.mem_mb
            limit = state.remaining[j.job_id] / e.min * options.time_limit_factor
        elif kind is None:
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
            elastic=elastic_of(j, state.caps.get(j.job_id)) if j.job_id in elastic else None,
        )

    def end_run(job_id: int, now: float) -> _Run:
        """A run stops: its usage is charged (as RunEnds charges it) and it leaves."""
        run = running.pop(job_id)
        j = by_id[job_id]
        used = sum(allocation_usage(a, now, cpu_weight) for a in run.allocs)
        ledger.charge((j.account, j.user), used, now)
        outcomes[job_id].gpu_seconds += (now - run.started) * (run.replicas or shares[job_id])
        return run

    def running_allocs() -> tuple[Allocation, ...]:
        """What the running jobs hold, with their newest checkpoints in shrink-ckpt and
        the ends their progress reports give (SimOptions.progress_after_s)."""
        told, interval = options.progress_after_s, options.checkpoint_interval_s
        if not with_checkpoints and told is None:
            return tuple(a for r in running.values() for a in r.allocs)
        held = []
        for r in running.values():
            for a in r.allocs:
                if with_checkpoints:
                    a = with_checkpoint(a, r.started + r.overhead, now, interval)
                if told is not None and now - r.started >= told:
                    a = replace(a, expected_end=r.end)
                held.append(a)
        return tuple(held)

    def snapshot_at(now: float) -> Snapshot:
        """What a pass reads at `now`: the nodes, what runs, the queue, fair share."""
        nonlocal tree_of
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
        return Snapshot(
            nodes=views,
            running=running_allocs(),
            pending=tuple(pending_jobs.values()),
            fairshare=fairshare,
            groups=list(groups.groups.values()),
        )

    finished = 0
    while events:
        now = events[0][0]
        arrived: list[int] = []
        while events and events[0][0] == now:
            _, kind, job_id, token = heapq.heappop(events)
            if kind == 2:
                wake_pending = False
            elif kind == 1:
                pending_jobs[job_id] = p = pending_of(by_id[job_id])
                groups.add(p)
                outcomes[job_id].contenders_at_arrival = len(pending_jobs) + len(running)
                arrived.append(job_id)
            elif job_id in running and running[job_id].token == token:
                end_run(job_id, now)
                outcomes[job_id].end = now
                ended = True
                finished += 1
        # With nothing pending, a pass is due only where an elastic job may grow: its
        # delay ended (a wake) or GPUs came free (an end).
        grow_due = (
            bool(elastic)
            and (now in wakes or ended)
            and any(
                r.replicas and r.replicas < r.allocs[0].elastic.max  # type: ignore[union-attr]
                for r in running.values()
            )
        )
        wakes.discard(now)
        if ended and on_progress is not None:
            on_progress(finished, len(runnable))
        ended = False
        if on_arrival is not None and arrived:
            on_arrival(snapshot_at(now), now, arrived)
        if not pending_jobs and not grow_due:
            continue
        if now < next_pass:
            if grow_due:
                wakes.add(next_pass)
            if not wake_pending:
                heapq.heappush(events, (next_pass, 2, -1, 0))
                wake_pending = True
            continue
        next_pass = now + options.pass_interval_s
        while True:
            decisions = schedule(snapshot_at(now), now, policy, explain=False)
            passes += 1
            for pre in decisions.preempts:
                run = end_run(pre.job_id, now)
                out = outcomes[pre.job_id]
                done = run.progress(now)
                interval = options.checkpoint_interval_s
                kept = done if interval <= 0 else (done // interval) * interval
                per = run.replicas or 1  # an elastic job's work is in replica-seconds
                state.remaining[pre.job_id] -= kept * per
                out.lost_seconds += (done - kept) * per / (out.job.gpus if run.replicas else 1)
                out.preemptions += 1
                preemptions += 1
                if requeued_after_preemption(pre.mode, may_requeue=True):
                    pending_jobs[pre.job_id] = p = pending_of(by_id[pre.job_id])
                    groups.add(p)
                else:
                    out.end = now
            for rz in decisions.resizes:  # it saves at the signal: all its work is kept
                run = end_run(rz.job_id, now)
                state.remaining[rz.job_id] -= run.progress(now) * run.replicas
                state.caps[rz.job_id] = rz.replicas
                outcomes[rz.job_id].resizes += 1
                resizes += 1
                pending_jobs[rz.job_id] = p = pending_of(by_id[rz.job_id])
                groups.add(p)
            for s in decisions.starts:
                p = pending_jobs.pop(s.job_id)
                groups.remove(p)
                token = state.tokens[s.job_id] + 1
                state.tokens[s.job_id] = token
                allocs = [p.allocate(node, gpus, now) for node, gpus in s.placements]
                if p.gpu_type is not None:  # parts of a GPU: charged by their share
                    allocs = [replace(a, gpu_units=shares[s.job_id]) for a in allocs]
                if p.elastic is not None:  # at the size it started at; a cap holds once
                    state.caps.pop(s.job_id, None)
                    grown = elastic_of(by_id[s.job_id], None)
                    allocs = [replace(a, cpus=s.cpus, mem_mb=s.mem_mb, elastic=grown)
                              for a in allocs]  # fmt: skip
                out = outcomes[s.job_id]
                overhead = options.restart_cost_s if out.first_start is not None else 0.0
                replicas = len(s.gpu_indices) if p.elastic is not None else 0
                ends = now + overhead + state.remaining[s.job_id] / max(1, replicas)
                running[s.job_id] = _Run(allocs, token, now, overhead, replicas, ends)
                if out.first_start is None:
                    out.first_start = now
                heapq.heappush(events, (ends, 0, s.job_id, token))
            if not decisions.preempts and not decisions.resizes:
                break
        if elastic:
            due = next_change((a for r in running.values() for a in r.allocs), policy, now)
            if due is not None and due not in wakes:
                wakes.add(due)
                heapq.heappush(events, (due, 2, -1, 0))
    return SimResult(
        policy_name,
        list(outcomes.values()),
        unschedulable,
        sum(n.gpus for n in nodes),
        preemptions,
        passes,
        resizes,
    )


def uniform_nodes(
    count: int, gpus: int, cpus: int, mem_mb: int, gpu_type: str = "gpu"
) -> list[TraceNode]:
    """`count` identical nodes."""
    return [TraceNode(f"node{i:04d}", gpus, cpus, mem_mb, gpu_type) for i in range(count)]


__all__ = ["POLICIES", "SimOptions", "SimResult", "simulate", "uniform_nodes"]
