"""One replay of a trace (podium.sim.engine.simulate): its state as named fields, and
its steps as methods with one job each.

An event queue holds arrivals, ends and wakes (passes due for elastic jobs). At each
instant: `take_events` (arrivals queue, ends charge their usage), then, when a pass is
due, `pass_at` runs schedule() until it decides no more preemptions or resizes,
applying each decision (`preempted`, `resized`, `started`) as the daemon would: usage
charged as RunEnds charges it, work since the last checkpoint lost, a preempted job
requeued by `requeued_after_preemption`. Pure: no clock, no I/O.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from podium.sched import Allocation, Decisions, PendingJob, Snapshot, schedule
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
from podium.sched.las import next_change as las_next_change
from podium.sched.order import PendingGroups, orders_by_limit
from podium.sched.passed import PassedClock, pass_over
from podium.sim.elastic_replay import elastic_of, is_elastic, picked, with_checkpoint
from podium.sim.engine import (
    QOS_PRIORITY,
    JobOutcome,
    SimOptions,
    SimResult,
    _fits_somewhere,
    _Run,
    _State,
    checkpoints,
    gang_shape,
    policy_of,
)
from podium.sim.sharing import plan
from podium.sim.traces import TraceJob, TraceNode

FINISH, ARRIVE, WAKE, SAVED = 0, 1, 2, 3  # event kinds, in the order one instant takes them


class Hooks(NamedTuple):
    """What a replay tells its caller as it goes (see podium.sim.engine.simulate)."""

    on_arrival: Callable[[Snapshot, float, list[int]], None] | None = None
    on_progress: Callable[[int, int], None] | None = None


class Replay:
    """A trace replayed on nodes under one policy (see podium.sim.engine.simulate)."""

    def __init__(
        self, trace: list[TraceJob], nodes: list[TraceNode], policy_name: str,
        options: SimOptions, hooks: Hooks,
    ) -> None:  # fmt: skip
        self.policy_name, self.options, self.nodes = policy_name, options, nodes
        self.on_arrival, self.on_progress = hooks
        self.policy = policy_of(policy_name, options)
        self.sharing = plan(trace, nodes, options.sharing, options.mps_units)
        self.views = tuple(self.sharing.view(n) for n in nodes)
        # whole GPUs per node (fewer where some are shared): what gangs are shaped on
        self.whole = [
            replace(n, gpus=sum(1 for g in v.gpus if g.whole))
            for n, v in zip(nodes, self.views, strict=True)
        ]
        self.runnable = [j for j in trace if self.fits(j)]
        self.unschedulable = [j for j in trace if not self.fits(j)]
        runnable = self.runnable
        self.outcomes = {j.job_id: JobOutcome(j) for j in runnable}
        self.by_id = {j.job_id: j for j in runnable}
        self.pending_jobs: dict[int, PendingJob] = {}
        self.groups = PendingGroups(orders_by_limit(self.policy))  # for a lazy walk
        self.running: dict[int, _Run] = {}
        self.node_gpus = node_gpus = max((n.gpus for n in self.whole), default=0)
        share, mode = options.elastic_share, options.elastic_mode
        self.elastic = {j.job_id for j in runnable if is_elastic(j, share, mode, node_gpus)}
        for j in runnable:
            self.outcomes[j.job_id].elastic = picked(j, share, node_gpus)
        self.state = _State(
            {j.job_id: j.duration * (j.gpus if j.job_id in self.elastic else 1) for j in runnable},
            {j.job_id: 0 for j in runnable},
        )
        self.saving = {j.job_id for j in runnable if checkpoints(j, options.checkpointing)}
        self.with_checkpoints = mode == "shrink-ckpt" and share > 0
        self.wakes: set[float] = set()  # passes due when an elastic job may grow or shrink
        self.ended = False  # a job ended at this instant
        self.ledger = UsageLedger(options.fairshare_half_life_s)  # as the daemon charges
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, id, token)
        for j in runnable:
            heapq.heappush(self.events, (j.submit_time, ARRIVE, j.job_id, 0))
        self.preemptions = self.passes = self.resizes = self.finished = 0
        self.next_pass = 0.0
        self.wake_pending = False
        self.shares: dict[int, float] = {}  # job -> GPUs it holds (parts by their share)
        self.tree_of: tuple[set[tuple[str, str]], Association] = (set(), Association("root"))
        self.cpu_weight = 0.0  # fair share charges GPU-seconds only, the daemon's default
        self.attained: dict[int, float] = {}  # job -> GPU-seconds of its ended runs
        self.queued_at: dict[int, float] = {}  # job -> when it last joined the queue
        self.waited: dict[int, float] = {}  # job -> seconds waited before its current run
        self.passed = PassedClock()  # when later jobs first started ahead of each waiting one
        self.workload: tuple[tuple[str | None, int, float], ...] = ()
        if self.policy.placement == "fgd":  # the trace's own mix of requests, as FGD weighs it
            kinds = Counter((p.gpu_type, p.gpus) for p in map(self.pending_of, self.runnable))
            self.workload = tuple((t, n, float(c)) for (t, n), c in kinds.items() if n)

    def fits(self, j: TraceJob) -> bool:
        """Whether some node (or gang of nodes) could ever hold `j`."""
        kind, count, _ = self.sharing.request(j)
        if kind is None:
            return _fits_somewhere(replace(j, gpus=count), self.whole)
        one = PendingJob(j.job_id, j.user, "", "main", 0, 0.0, j.cpus, j.mem_mb, count, kind)
        return any(could_ever_fit(one, v) for v in self.views)

    def pending_of(self, j: TraceJob) -> PendingJob:
        """`j` as the queue holds it now (an elastic job at its smallest size, with the
        work it has left)."""
        options, state = self.options, self.state
        limit = j.time_limit if j.time_limit is not None else j.duration * options.time_limit_factor
        kind, asked, part = self.sharing.request(j)
        self.shares[j.job_id] = part
        if j.job_id in self.elastic:
            e = elastic_of(j, state.caps.get(j.job_id))
            count, gpus, cpus, mem_mb = 1, e.min * e.gpus, e.min * e.cpus, e.min * e.mem_mb
            limit = state.remaining[j.job_id] / e.min * options.time_limit_factor
        elif kind is None:
            count, gpus, cpus, mem_mb = gang_shape(replace(j, gpus=asked), self.node_gpus)
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
            elastic=elastic_of(j, state.caps.get(j.job_id)) if j.job_id in self.elastic else None,
            attained_gpu_s=self.attained.get(j.job_id, 0.0),
            queued_at=self.queued_at.get(j.job_id),
            waited_s=self.waited.get(j.job_id, 0.0),
            passed_at=self.passed.at(j.job_id),
        )

    def queue(self, job_id: int, now: float | None = None) -> None:
        """Job `job_id` waits (again, from `now`) in the queue."""
        if now is not None:
            self.queued_at[job_id] = now
        self.passed.queued(job_id, self.by_id[job_id].submit_time)
        self.pending_jobs[job_id] = p = self.pending_of(self.by_id[job_id])
        self.groups.add(p)

    def end_run(self, job_id: int, now: float) -> _Run:
        """A run stops: its usage is charged (as RunEnds charges it) and it leaves."""
        run = self.running.pop(job_id)
        j = self.by_id[job_id]
        used = sum(allocation_usage(a, now, self.cpu_weight) for a in run.allocs)
        self.ledger.charge((j.account, j.user), used, now)
        share = run.replicas or self.shares[job_id]
        self.outcomes[job_id].gpu_seconds += (now - run.started) * share
        self.attained[job_id] = self.attained.get(job_id, 0.0) + (now - run.started) * share
        return run

    def running_allocs(self, now: float) -> tuple[Allocation, ...]:
        """What the running jobs hold, with their newest checkpoints in shrink-ckpt and
        the ends their progress reports give (SimOptions.progress_after_s)."""
        told, interval = self.options.progress_after_s, self.options.checkpoint_interval_s
        if not self.with_checkpoints and told is None:
            return tuple(a for r in self.running.values() for a in r.allocs)
        held = []
        for r in self.running.values():
            for a in r.allocs:
                if self.with_checkpoints:
                    a = with_checkpoint(a, r.started + r.overhead, now, interval)
                if told is not None and now - r.started >= told:
                    a = replace(a, expected_end=r.end)
                held.append(a)
        return tuple(held)

    def snapshot_at(self, now: float) -> Snapshot:
        """What a pass reads at `now`: the nodes, what runs, the queue, fair share."""
        policy, groups = self.policy, self.groups
        fairshare: dict[tuple[str, str], float] = {}
        if policy.use_priority and policy.weights.fairshare > 0:
            seen = self.ledger.keys() | {
                (g.jobs[0].account, g.jobs[0].user) for g in groups.groups.values()
            }
            if seen != self.tree_of[0]:  # the tree changes only when a new user shows up
                self.tree_of = (seen, share_tree({}, {}, sorted(seen)))
            held = (a for r in self.running.values() for a in r.allocs)
            live = live_usage(self.ledger.at(now), held, now, self.cpu_weight)
            fairshare = user_factors(self.tree_of[1], live)
        return Snapshot(
            nodes=self.views,
            running=self.running_allocs(now),
            pending=tuple(self.pending_jobs.values()),
            fairshare=fairshare,
            groups=list(groups.groups.values()),
            workload=self.workload,
        )

    def run(self) -> SimResult:
        """Every event of the trace, in time order; the outcome."""
        events = self.events
        while events:
            now = events[0][0]
            arrived = self.take_events(now)
            grow_due = self.grow_due(now)
            self.wakes.discard(now)
            if self.ended and self.on_progress is not None:
                self.on_progress(self.finished, len(self.runnable))
            self.ended = False
            if self.on_arrival is not None and arrived:
                self.on_arrival(self.snapshot_at(now), now, arrived)
            if not self.pending_jobs and not grow_due:
                continue
            if now < self.next_pass:
                self.wait_for_pass(grow_due)
                continue
            self.next_pass = now + self.options.pass_interval_s
            self.pass_at(now)
            if self.elastic:
                self.wake_for_change(now)
            if self.policy.las is not None and self.pending_jobs:
                self.wake_for_service(now)
        return SimResult(
            self.policy_name,
            list(self.outcomes.values()),
            self.unschedulable,
            sum(n.gpus for n in self.nodes),
            self.preemptions,
            self.passes,
            self.resizes,
        )

    def take_events(self, now: float) -> list[int]:
        """The events of instant `now`: wakes clear, arrivals queue, runs that reach
        their end finish. The ids that arrived."""
        events, arrived = self.events, []
        while events and events[0][0] == now:
            _, kind, job_id, token = heapq.heappop(events)
            if kind == WAKE:
                self.wake_pending = False
            elif kind == SAVED:
                if job_id in self.running and self.running[job_id].token == token:
                    self.end_run(job_id, now)
                    self.queue(job_id, now)
            elif kind == ARRIVE:
                self.queue(job_id)
                outcome = self.outcomes[job_id]
                outcome.contenders_at_arrival = len(self.pending_jobs) + len(self.running)
                arrived.append(job_id)
            elif job_id in self.running and self.running[job_id].token == token:
                self.end_run(job_id, now)
                self.outcomes[job_id].end = now
                self.ended = True
                self.finished += 1
        return arrived

    def grow_due(self, now: float) -> bool:
        """With nothing pending, a pass is due only where an elastic job may grow: its
        delay ended (a wake) or GPUs came free (an end)."""
        return (
            bool(self.elastic)
            and (now in self.wakes or self.ended)
            and any(
                r.replicas and r.replicas < r.allocs[0].elastic.max  # type: ignore[union-attr]
                for r in self.running.values()
            )
        )

    def wait_for_pass(self, grow_due: bool) -> None:
        """A pass is due but passes are spaced (pass_interval_s): wake at the next."""
        if grow_due:
            self.wakes.add(self.next_pass)
        if not self.wake_pending:
            heapq.heappush(self.events, (self.next_pass, WAKE, -1, 0))
            self.wake_pending = True

    def pass_at(self, now: float) -> None:
        """Passes at `now` until one decides no preemption and no resize."""
        while True:
            decisions = schedule(self.snapshot_at(now), now, self.policy, explain=False)
            self.passes += 1
            self.preempted(decisions, now)
            self.resized(decisions, now)
            self.started(decisions, now)
            if not decisions.preempts and not decisions.resizes:
                break

    def preempted(self, decisions: Decisions, now: float) -> None:
        """Each preempted run stops; what it did since its last checkpoint is lost; it
        is requeued as its mode says, else it ends."""
        for pre in decisions.preempts:
            if self.policy.las is not None:
                self.save_and_stop(pre.job_id, now)
                continue
            run = self.end_run(pre.job_id, now)
            out = self.outcomes[pre.job_id]
            done = run.progress(now)
            interval = self.options.checkpoint_interval_s
            if pre.job_id not in self.saving:  # no checkpoint: it starts over
                kept = 0.0
            else:
                kept = done if interval <= 0 else (done // interval) * interval
            per = run.replicas or 1  # an elastic job's work is in replica-seconds
            self.state.remaining[pre.job_id] -= kept * per
            out.lost_seconds += (done - kept) * per / (out.job.gpus if run.replicas else 1)
            out.preemptions += 1
            self.preemptions += 1
            if requeued_after_preemption(pre.mode, may_requeue=True):
                self.queue(pre.job_id, now)
            else:
                out.end = now

    def save_and_stop(self, job_id: int, now: float) -> None:
        """Least attained service: the preempted run saves all it did by the signal; it
        holds its GPUs `save_s` more (a SAVED event), then is requeued."""
        run = self.running[job_id]
        per = run.replicas or 1
        self.state.remaining[job_id] -= run.progress(now) * per
        self.outcomes[job_id].preemptions += 1
        self.preemptions += 1
        save = self.options.save_s
        if save <= 0:
            self.end_run(job_id, now)
            self.queue(job_id, now)
            return
        run.token = self.state.tokens[job_id] = self.state.tokens[job_id] + 1
        run.end = now + save
        run.overhead = float("inf")  # no progress while it saves
        run.allocs = [replace(a, preempting=True) for a in run.allocs]
        heapq.heappush(self.events, (now + save, SAVED, job_id, run.token))

    def resized(self, decisions: Decisions, now: float) -> None:
        """Each resized elastic run saves at the signal (all its work kept), stops, and
        waits to start again at its new size."""
        for rz in decisions.resizes:
            run = self.end_run(rz.job_id, now)
            self.state.remaining[rz.job_id] -= run.progress(now) * run.replicas
            self.state.caps[rz.job_id] = rz.replicas
            self.outcomes[rz.job_id].resizes += 1
            self.resizes += 1
            self.queue(rz.job_id, now)

    def started(self, decisions: Decisions, now: float) -> None:
        """Each start runs until its work is done (plus its restart cost after the
        first start): its end is an event."""
        state, options = self.state, self.options
        for s in decisions.starts:
            p = self.pending_jobs.pop(s.job_id)
            self.groups.remove(p)
            token = state.tokens[s.job_id] + 1
            state.tokens[s.job_id] = token
            allocs = [p.allocate(node, gpus, now) for node, gpus in s.placements]
            self.waited[s.job_id] = allocs[0].waited_s
            if p.gpu_type is not None:  # parts of a GPU: charged by their share
                allocs = [replace(a, gpu_units=self.shares[s.job_id]) for a in allocs]
            if self.policy.las is not None and s.job_id in self.saving:  # save_and_stop
                allocs = [replace(a, saves=True) for a in allocs]
            if p.elastic is not None:  # at the size it started at; a cap holds once
                state.caps.pop(s.job_id, None)
                grown = elastic_of(self.by_id[s.job_id], None)
                allocs = [replace(a, cpus=s.cpus, mem_mb=s.mem_mb, elastic=grown)
                          for a in allocs]  # fmt: skip
            newly = self.passed.started(s.job_id, p.submit_time, now)
            pass_over(self.pending_jobs, self.groups, newly, now)
            out = self.outcomes[s.job_id]
            overhead = options.restart_cost_s if out.first_start is not None else 0.0
            replicas = len(s.gpu_indices) if p.elastic is not None else 0
            ends = now + overhead + state.remaining[s.job_id] / max(1, replicas)
            self.running[s.job_id] = _Run(allocs, token, now, overhead, replicas, ends)
            if out.first_start is None:
                out.first_start = now
            heapq.heappush(self.events, (ends, FINISH, s.job_id, token))

    def wake_for_service(self, now: float) -> None:
        """Least attained service: wake when a running job next crosses a queue limit
        or may be stopped again, or a waiting job is promoted."""
        rules = self.policy.las
        assert rules is not None
        due = las_next_change(self.running_allocs(now), self.pending_jobs.values(), now, rules)
        if due is not None and due not in self.wakes:
            self.wakes.add(due)
            heapq.heappush(self.events, (due, WAKE, -1, 0))

    def wake_for_change(self, now: float) -> None:
        """Wake when a running elastic job may next grow or be shrunk."""
        held = (a for r in self.running.values() for a in r.allocs)
        due = next_change(held, self.policy, now)
        if due is not None and due not in self.wakes:
            self.wakes.add(due)
            heapq.heappush(self.events, (due, WAKE, -1, 0))


__all__ = ["Hooks", "Replay"]
