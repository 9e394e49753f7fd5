"""The embedded cluster's state transitions: a scheduling pass, a run's end, recovery.

The reactor decides and records; its side effects (launch, signal, notify) go through
an `Effects`. Every method runs under `lock`, which the API's handlers hold too,
except the pure part of a pass: `run_pass` takes a snapshot under the lock, lets go
while `schedule()` thinks, and takes it again to apply what still holds (a job
cancelled, held or changed meanwhile is not started; a node drained or a GPU fenced
meanwhile voids the pass's starts and asks for another pass).

Passes follow changes, not a clock: a submit, an end, a release, a resume (`wake`);
a --begin time coming due; and one pass every PERIODIC_PASS_S for what time alone
changes (ages, preemption's exempt time). They are spaced by at least PASS_SPACING
times the time the last one spent deciding (reading, snapshot, schedule; not its
launches), so a long queue takes at most a fifth of a core and the API's threads get
the interpreter most of the time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from podium.api.selection import JobFilter
from podium.api.states import Reason
from podium.config.cluster import ClusterConfig
from podium.errors import StoreError
from podium.jobspec.job import JobSpec, JobState
from podium.sched import Allocation, Decisions, NodeView, PendingJob, Snapshot, schedule
from podium.sched.config_policy import half_life_s, policy_from_config
from podium.sched.elastic import next_change
from podium.sched.fairshare import user_factors
from podium.sched.las import next_change as las_next_change
from podium.sched.passed import PassedClock
from podium.server.effects import Effects
from podium.server.ends import RunEnds
from podium.server.job_rows import gpu_owners, held_units
from podium.server.launch import Planner
from podium.server.local_node import LocalNode
from podium.server.pass_starts import PassStarts
from podium.server.pass_stats import PassStats
from podium.server.progress_book import ProgressBook
from podium.server.rank_watch import RankWatch
from podium.server.running_specs import RunningSpecs
from podium.server.snapshot import (
    PendingQueue,
    allocation,
    build_snapshot,
    next_begin,
    node_view,
    share_inputs,
)
from podium.server.spare_refill import SpareRefill
from podium.store.db import Row, Store
from podium.store.health_table import HealthTable

log = logging.getLogger("podium.reactor")

RUNNING = JobState.RUNNING.value
PERIODIC_PASS_S = 30.0
PASS_SPACING = 4.0  # the gap after a pass, in multiples of its length


class PassInputs(NamedTuple):
    """What a pass reads from the store and the node under the lock."""

    view: NodeView
    running: tuple[Allocation, ...]
    unhealthy: set[tuple[str, int | None]]
    exclude: dict[int, frozenset[tuple[str, int]]]
    usage: dict[tuple[str, str], float]
    job_states: dict[int, str]
    array_members: dict[int, tuple[int, ...]]


def started_elastic(
    decisions: Decisions, seen: Mapping[int, PendingJob], now: float
) -> list[Allocation]:
    """What the elastic jobs a pass starts will hold, at the size each starts at."""
    out = []
    for start in decisions.starts:
        job = seen.get(start.job_id)
        if job is not None and job.elastic is not None:
            held = job.allocate(start.node, start.gpu_indices, now)
            out.append(dataclasses.replace(held, cpus=start.cpus, mem_mb=start.mem_mb))
    return out


class Reactor:
    """Owns the transitions of one embedded cluster's jobs."""

    def __init__(
        self,
        store: Store,
        config: ClusterConfig,
        node: LocalNode,
        health: HealthTable,
        planner: Planner,
        effects: Effects,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config
        self.node = node
        self.health = health
        self.planner = planner
        self.effects = effects
        self.clock = clock
        self.lock = threading.RLock()
        self.policy = policy_from_config(config)
        self.half_life_s = half_life_s(config)
        self.queue = PendingQueue(store, config, self._unreadable)
        self.passed = PassedClock()  # the wait guard's: when later jobs first went ahead
        self.last: Decisions | None = None  # the last pass's decisions (podium priority)
        self.specs = RunningSpecs(store)  # running jobs' specs, parsed once
        self.ends = RunEnds(store, config, planner, effects, self.clock_now, self.specs)
        self.ends.refill = SpareRefill(store, node, health, effects.runs, self.running_rows)
        self.ranks = RankWatch(store, self.clock_now)  # ranks' step seconds, stragglers
        self.starter = PassStarts(
            store, node, planner, effects, self.queue, self.clock_now, self.specs, self.ends
        )
        self._reasons: dict[int, str] = {}  # what the store holds for pending jobs
        self._reserve_retry = 0.0  # when to try again to keep the state disk's reserve
        self._pass_lock = threading.Lock()  # one pass at a time
        self._wanted = True  # something changed that a pass has not seen yet
        self._next_pass = 0.0  # when time alone makes a pass due
        self._spacing = 0.0  # the last pass's length: the least gap before the next
        self._last_end = 0.0  # when the last pass ended (time.monotonic)
        self.pass_stats = PassStats()  # what the passes cost (/metrics)
        self._health_seen = -1  # the health table's version the last pass saw
        self.checkpoints: dict[int, float] = {}  # running job -> newest checkpoint (sampled)
        self.reported: dict[int, float] = {}  # running job -> its last `podium checkpoint`
        self.progress = ProgressBook()  # running job -> what it says of its progress
        self.generation = 0  # raised by each change a forecast would see (forecast_key)

    # --- what others ask of it ------------------------------------------------------

    def clock_now(self) -> float:
        """The reactor's clock, read through it (tests replace `clock`)."""
        return self.clock()

    @property
    def job_failed_hooks(self) -> list[Callable[[list[int]], None]]:
        """Told the GPUs of every run that failed on its own (not fenced)."""
        return self.ends.job_failed_hooks

    def spec(self, row: Row) -> JobSpec:
        """A running job's spec (RunningSpecs: parsed once while it runs)."""
        return self.specs.of(row)

    def request_cancel(self, job_id: int) -> None:
        """A running job was cancelled: its end is recorded CANCELLED."""
        self.ends.request_cancel(job_id)

    def fail_jobs(self, job_ids: list[int], reason: str, gpu: int | None) -> None:
        """Stop jobs whose hardware failed (see RunEnds.fail_jobs)."""
        with self.lock:
            self.ends.fail_jobs(job_ids, reason, gpu)

    def wake(self) -> None:
        """Ask for a pass soon (a change the store does not record: a node resumed)."""
        self._wanted = True
        self.generation += 1

    def forecast_key(self) -> tuple[int, int, int]:
        """What a forecast made now would differ by: raised by each pass that saw new,
        ended or changed jobs or started, stopped or resized any, by a wake, a health
        change and a progress report (server.forecast_view keeps a forecast while
        this stays the same)."""
        return (self.generation, self.health.version, self.progress.version)

    def running_rows(self) -> list[Row]:
        return self.store.jobs(JobFilter(states=(RUNNING,)))

    def gpu_jobs(self) -> dict[int, list[int]]:
        """Physical GPU index -> the running jobs on it: the one holding it whole, or
        those holding its MIG slices."""
        with self.lock:
            owners = gpu_owners(self.running_rows())
        out: dict[int, list[int]] = {}
        for index, job_id in sorted(owners.items()):
            out.setdefault(self.node.parent_of(index), []).append(job_id)
        return out

    def running_job_ids(self) -> list[int]:
        with self.lock:
            return [r["job_id"] for r in self.running_rows()]

    # --- the loop ---------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """After a (re)start: adopt running jobs, record ends that happened meanwhile,
        and put back jobs whose supervisor never started. Returns counts."""
        counts = {"adopted": 0, "ended": 0, "relaunch": 0, "lost": 0}
        with self.lock:
            for row in self.running_rows():
                status = self.ends.collect(row)
                counts[status] = counts.get(status, 0) + 1
        return counts

    def collect(self) -> None:
        """Record every run that ended since the last call."""
        with self.lock:
            self.effects.runs.reap()
            for row in self.running_rows():
                try:
                    self.ends.collect(row)
                except StoreError:
                    # The state disk is full: spend the reserve on recording what jobs
                    # did (an outcome must not wait on, or be lost to, a full disk).
                    if not self.store.release_reserve():
                        raise
                    log.error("state disk full: the reserve is spent on recording outcomes")
                    self.ends.collect(self.store.job(row["job_id"]))
            if self.store.reserve_released and self.clock() >= self._reserve_retry:
                self._reserve_retry = self.clock() + 30.0
                if self.store.keep_reserve():
                    log.warning("state disk has room again: the reserve is kept back again")

    def pass_wanted(self) -> bool:
        """Whether something changed that no pass has seen, or time made one due."""
        return (
            self._wanted
            or self.queue.has_changes()
            or self.health.version != self._health_seen
            or time.monotonic() >= self._next_pass
        )

    def pass_due(self) -> float:
        """Seconds until a pass is due (0: now), spaced by the last pass's length."""
        wait = 0.0 if self.pass_wanted() else self._next_pass - time.monotonic()
        return max(wait, self._last_end + self._spacing - time.monotonic(), 0.0)

    def tick(self) -> int:
        """Collect ended runs and, when one is due, run a pass. Returns the starts."""
        self.collect()
        return self.run_pass() if self.pass_wanted() else 0

    def run_pass(self) -> int:
        """One scheduling pass (see the module docstring). Returns how many started."""
        with self._pass_lock:
            began = time.monotonic()
            with self.lock:  # read what the pass needs; build it without the lock
                self._wanted = False
                self._health_seen = self.health.version
                if self.queue.refresh():
                    self.generation += 1
                now = self.clock()
                seen = dict(self.queue.jobs)
                inputs = self._read_inputs(now, seen)
                marked = self.passed.mark(seen)
            snap = self._build_snapshot(now, marked, inputs)
            decisions = schedule(snap, now, self.policy)
            reasons = self._changed_reasons(decisions, seen)
            thought = time.monotonic() - began
            with self.lock:
                started = self._apply(snap, seen, decisions, reasons)
                if decisions.starts or decisions.preempts or decisions.resizes:
                    self.generation += 1
            # Jobs that came meanwhile are not in `seen`, but they asked for another pass.
            # An elastic job started by this very pass may grow when its delay ends: the
            # pass that lets it is due then (it is in no snapshot's running jobs yet).
            now_running = (*snap.running, *started_elastic(decisions, seen, now))
            nearest = min(
                (t for t in (next_begin(seen.values(), self.clock()),
                             next_change(now_running, self.policy, now),
                             self._service_change(snap, decisions, marked, now))
                 if t is not None),
                default=None,
            )  # fmt: skip
            end = time.monotonic()
            self.pass_stats.record(end - began, len(seen), self.clock())
            # Spaced by what deciding cost (a long queue), not by the launches: starting
            # many jobs must not hold back the pass that starts the next ones.
            self._last_end, self._spacing = end, PASS_SPACING * thought
            self._next_pass = end + PERIODIC_PASS_S
            if nearest is not None:
                self._next_pass = min(self._next_pass, end + max(0.0, nearest - self.clock()))
            return started

    def _service_change(
        self, snap: Snapshot, decisions: Decisions, seen: Mapping[int, PendingJob], now: float
    ) -> float | None:
        """Least attained service: when a running job next crosses a queue limit or may
        be stopped, or a waiting job is promoted (None: not ordered so, or nothing waits
        that this pass did not start)."""
        rules = self.policy.las
        if rules is None:
            return None
        started = {s.job_id for s in decisions.starts}
        waiting = [j for j in seen.values() if j.job_id not in started]
        if not waiting:
            return None
        new = [  # what this pass starts: it may cross a limit too
            dataclasses.replace(seen[s.job_id].allocate(s.node, s.gpu_indices, now), saves=True)
            for s in decisions.starts
            if s.job_id in seen
        ]
        return las_next_change((*snap.running, *new), waiting, now, rules)

    def snapshot_now(self) -> tuple[Snapshot, float]:
        """The snapshot a pass would read now, and now (for a forecast): read under the
        lock, built outside it; the queue as the last pass left it."""
        with self.lock:
            now = self.clock()
            seen = self.passed.mark(self.queue.jobs)
            inputs = self._read_inputs(now, seen)
        return self._build_snapshot(now, seen, inputs), now

    def pending_reasons(self) -> dict[int, str]:
        """Each pending job's reason as the last passes left it (a copy: one C-level
        dict copy under the GIL, so a pass writing meanwhile cannot tear it)."""
        return self._reasons.copy()

    def _read_inputs(self, now: float, pending: dict[int, PendingJob]) -> PassInputs:
        """What a snapshot needs from the store and the node (under the lock)."""
        view, fenced, unhealthy = node_view(self.node, self.store, self.health)
        node = self.node
        running = tuple(
            allocation(
                r,
                node.name,
                self.spec(r).exclusive,
                fenced,
                now,
                node.gpu_units(held_units(r)),
                max(self.checkpoints.get(r["job_id"], 0.0), self.reported.get(r["job_id"], 0.0))
                or None,
                self.progress.expected_end(r["job_id"], r["start_time"]),
                self.spec(r).requeue,
            )
            for r in self.running_rows()
        )
        dep_ids = {j for job in pending.values() for d in job.dependencies for j in d.job_ids}
        return PassInputs(
            view,
            running,
            unhealthy,
            dict(self.queue.exclude),
            self.store.usage(now, self.half_life_s),
            self.store.states_of(dep_ids),
            self.store.array_members(dep_ids),
        )

    def _build_snapshot(
        self, now: float, pending: dict[int, PendingJob], got: PassInputs
    ) -> Snapshot:
        """The Snapshot from what `_read_inputs` read (no store: runs without the lock)."""
        shares = user_factors(
            *share_inputs(self.config, got.usage, got.running, pending.values(), now)
        )
        return build_snapshot(
            list(pending.values()),
            got.exclude,
            got.view,
            got.running,
            got.unhealthy,
            self.config,
            shares,
            got.job_states,
            got.array_members,
        )

    def _changed_reasons(self, decisions: Decisions, seen: dict[int, PendingJob]) -> dict[int, str]:
        """The reasons that differ from what the store holds (computed without the lock:
        only passes touch `_reasons`, one at a time)."""
        known = self._reasons
        for job_id in [j for j in known if j not in seen]:
            del known[job_id]
        return {j: r for j, r in decisions.reasons.items() if known.get(j) != r}

    def _apply(
        self,
        snap: Snapshot,
        seen: dict[int, PendingJob],
        decisions: Decisions,
        reasons: dict[int, str],
    ) -> int:
        """Carry out what still holds of a pass's decisions."""
        if self.queue.refresh():  # changed while the pass thought: another pass sees it
            self._wanted = True
        self.last = decisions
        current = self.queue.jobs

        def unchanged(job_id: int) -> bool:
            return current.get(job_id) is seen.get(job_id, False)

        view, _, _ = node_view(self.node, self.store, self.health)
        starts, preempts = decisions.starts, decisions.preempts
        if view != snap.nodes[0]:  # drained or fenced meanwhile: decide again
            starts, preempts = (), ()
            self._wanted = True
        if preempts:
            running = {r["job_id"] for r in self.running_rows()}
            for pre in preempts:
                if pre.job_id not in running:
                    continue
                self.store.set_preempt_mode(pre.job_id, pre.mode)  # survives a restart
                self.store.event(
                    self.clock(), "preempting", job_id=pre.job_id, detail=f"for job {pre.for_job}"
                )
                self.effects.runs.preempt(pre.job_id)
                log.info("job %s preempted (%s) for job %s", pre.job_id, pre.mode, pre.for_job)
        if decisions.resizes and view == snap.nodes[0]:
            self.starter.resize(decisions.resizes)
        cancels = [j for j in decisions.cancels if unchanged(j)]
        if cancels:
            self.store.cancel_pending(cancels, self.clock(), Reason.DEPENDENCY_NEVER)
        write = {j: r for j, r in reasons.items() if unchanged(j) and j not in cancels}
        if write:
            self.store.set_reasons(write)
            self._reasons.update(write)
        starts = tuple(s for s in starts if unchanged(s.job_id))
        if starts:
            self.starter.start(starts)
            now = self.clock()
            for s in starts:  # the jobs submitted before each that still wait are passed
                self.passed.started(s.job_id, seen[s.job_id].submit_time, now)
        self.queue.refresh()
        return len(starts)

    def _unreadable(self, job_id: int, exc: Exception) -> None:
        self.ends.hold_broken(job_id, "unreadable job", exc)
