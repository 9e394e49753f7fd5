"""Each pending job's expected start (`GET /v1/forecast`, `podium show`, the dashboard),
from the scheduler run forward on a virtual clock (`podium.sim.forecast`) over the
snapshot a pass would read, and what keeps it waiting in plain words
(`podium.sched.blockers`).

A forecast is made once and shared (`ForecastBook`): by every request until the cluster
changes (a pass that saw new, ended, started or changed jobs, a health change, a job's
progress report) or it is `MAX_AGE_S` old; never more often than `SPACING` times what
the last one cost, whoever asks and however often; one at a time (a request that
finds one being made waits for it). Each is bounded by `MAX_PASSES` passes and
`BUDGET_S` seconds of work. Made outside the daemon's lock: a pass, a submit or
another user's read waits on nothing but the snapshot's read. So one user looping on
`podium show` of a pending job costs the daemon one forecast per change, not one per
call (issue 43)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from podium.api.times import iso
from podium.sched.blockers import ExpectedStart, Explainer
from podium.sched.model import PendingJob, Snapshot
from podium.server.reactor import Reactor
from podium.sim.forecast import Forecast, forecast

MAX_PASSES = 100  # 10,000 pending on 64 GPUs: under 1 s when jobs are alike
BUDGET_S = 2.0  # and no pass begun after this much work (distinct shapes: bench)
MAX_AGE_S = 30.0  # a forecast of an unchanged cluster is made again after this
SPACING = 4.0  # and never sooner after the last than this many times its cost


def out_of_service(reactor: Reactor) -> dict[tuple[str, int | None], str]:
    """What of the node a job cannot get, and why: fenced GPUs (by their health
    reason), the whole node when it is fenced or drained (None for its GPU). The
    caller holds the reactor's lock."""
    name = reactor.node.name
    out: dict[tuple[str, int | None], str] = {}
    for h in reactor.health.all(name):
        if h.fenced:
            out[(name, h.gpu)] = h.reason or h.fault or "it failed a health check"
    row = reactor.store.node(name)
    if row["admin_state"] != "up":
        out[(name, None)] = f"{row['admin_state']}ed by an administrator" + (
            f" ({row['reason']})" if row["reason"] else ""
        )
    return out


@dataclass(frozen=True)
class Made:
    """One forecast: the snapshot it ran from and when, its result, its explainer, the
    cluster's version it saw (`key`), and when it was made and what it cost (monotonic
    seconds)."""

    snap: Snapshot
    now: float
    found: Forecast
    explainer: Explainer
    key: tuple[int, ...]
    made_at: float
    cost: float
    pending: dict[int, PendingJob]


class ForecastBook:
    """The daemon's shared forecast (see the module docstring). Thread-safe."""

    def __init__(
        self,
        reactor: Reactor,
        max_passes: int = MAX_PASSES,
        budget_s: float = BUDGET_S,
        ticks: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reactor = reactor
        self.max_passes = max_passes
        self.budget_s = budget_s
        self.ticks = ticks
        self._made: Made | None = None
        self._making = threading.Lock()  # one forecast at a time; the others wait for it
        self.made_count = 0  # how many were made (tests, the bench)

    @property
    def last_cost(self) -> float | None:
        """What the newest forecast cost (seconds of work; None before the first)."""
        made = self._made
        return None if made is None else made.cost

    def current(self) -> Made:
        """The forecast to answer with now: the kept one while it is still good (or
        too young to be made again), else a new one."""
        with self._making:
            made, tick = self._made, self.ticks()
            if made is not None:
                age = tick - made.made_at
                fresh = made.key == self.reactor.forecast_key() and age < MAX_AGE_S
                if fresh or age < SPACING * made.cost:
                    return made
            self._made = made = self._make()
            return made

    def _make(self) -> Made:
        reactor = self.reactor
        with reactor.lock:
            key = reactor.forecast_key()
            fenced = out_of_service(reactor)
        snap, now = reactor.snapshot_now()
        began = self.ticks()
        deadline = began + self.budget_s
        found = forecast(
            snap, now, reactor.policy, self.max_passes, lambda: self.ticks() >= deadline
        )
        expected = {
            j: ExpectedStart(e.start, e.node, e.gpu_indices) for j, e in found.starts.items()
        }
        explainer = Explainer(snap, reactor.policy, now, expected, fenced)
        done = self.ticks()
        self.made_count += 1
        pending = {job.job_id: job for job in snap.pending}
        return Made(snap, now, found, explainer, key, done, done - began, pending)

    def records(self, only: int | None = None) -> dict[str, Any]:
        """{"now", "until", "passes", "jobs": [...]}: one record per pending job in the
        forecast's snapshot (only job `only`, when given): its id, its expected start
        (ISO and epoch) and `start_kind`: "planned" (the passes started it: the node and
        GPUs it is expected on are given) or "estimate" (beyond the passes: the work
        ahead over the capacity, `podium.sim.forecast_bound`); with neither, None and
        `no_start_reason` (held, a dependency, fits no node, behind a job with no time
        limit); its reason and its `blockers` ({kind, text, job_ids, until}: what keeps
        it waiting, in plain words, read at this moment)."""
        made = self.current()
        now = max(made.now, self.reactor.clock())
        reasons = self.reactor.pending_reasons()
        if only is not None:
            one = made.pending.get(only)
            chosen = [] if one is None else [one]
        else:
            chosen = list(made.snap.pending)
        jobs = []
        beyond = made.found.beyond
        for job in chosen:
            start = made.found.starts.get(job.job_id)
            estimate = beyond.estimates.get(job.job_id) if start is None else None
            epoch = start.start if start is not None else estimate
            reason = reasons.get(job.job_id)
            blockers = [
                {"kind": b.kind, "text": b.text, "job_ids": list(b.job_ids), "until": b.until}
                for b in made.explainer.of(job, reason, now)
            ]
            jobs.append(
                {
                    "job_id": job.job_id,
                    "expected_start": None if epoch is None else iso(epoch),
                    "expected_start_epoch": epoch,
                    "start_kind": (
                        "planned"
                        if start is not None
                        else "estimate"
                        if epoch is not None
                        else None
                    ),
                    "no_start_reason": (
                        None if epoch is not None else beyond.unknown.get(job.job_id)
                    ),
                    "node": None if start is None else start.node,
                    "gpu_ids": [] if start is None else list(start.gpu_indices),
                    "reason": reason,
                    "blockers": blockers,
                }
            )
        return {"now": now, "until": made.found.until, "passes": made.found.passes, "jobs": jobs}


__all__ = ["BUDGET_S", "MAX_PASSES", "ForecastBook", "Made", "out_of_service"]
