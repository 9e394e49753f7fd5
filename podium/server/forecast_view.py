"""`GET /v1/forecast`: each pending job's expected start, from the scheduler run forward
on a virtual clock (`podium.sim.forecast`) over the snapshot a pass would read now, and
what keeps it waiting in plain words (`podium.sched.blockers`). Built outside the
daemon's lock; a pass is never held up by more than the read."""

from __future__ import annotations

from typing import Any

from podium.api.times import iso
from podium.sched.blockers import ExpectedStart, Explainer
from podium.server.reactor import Reactor
from podium.sim.forecast import forecast

MAX_PASSES = 100  # 10,000 pending on 64 GPUs: under 1 s (bench/forecast_speed.py)


def out_of_service(reactor: Reactor) -> dict[tuple[str, int | None], str]:
    """What of the node a job cannot get, and why: fenced GPUs (by their health
    reason), the whole node when it is fenced or drained (None for its GPU)."""
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


def forecast_records(
    reactor: Reactor, max_passes: int = MAX_PASSES, only: int | None = None
) -> dict[str, Any]:
    """{"now", "until", "passes", "jobs": [...]}: one record per pending job in the
    snapshot (only job `only`, when given): its id, its expected start (ISO and epoch;
    None when the forecast cannot tell: waiting behind a job with no time limit, held,
    or beyond `max_passes`), the node and GPUs it is expected on, its reason and its
    `blockers` ({kind, text, job_ids, until}: what keeps it waiting, in plain words)."""
    snap, now = reactor.snapshot_now()
    reasons = reactor.pending_reasons()
    found = forecast(snap, now, reactor.policy, max_passes)
    expected = {j: ExpectedStart(e.start, e.node, e.gpu_indices) for j, e in found.starts.items()}
    explainer = Explainer(snap, reactor.policy, now, expected, out_of_service(reactor))
    jobs = []
    for job in snap.pending:
        if only is not None and job.job_id != only:
            continue
        start = found.starts.get(job.job_id)
        reason = reasons.get(job.job_id)
        jobs.append(
            {
                "job_id": job.job_id,
                "expected_start": None if start is None else iso(start.start),
                "expected_start_epoch": None if start is None else start.start,
                "node": None if start is None else start.node,
                "gpu_ids": [] if start is None else list(start.gpu_indices),
                "reason": reason,
                "blockers": [
                    {"kind": b.kind, "text": b.text, "job_ids": list(b.job_ids), "until": b.until}
                    for b in explainer.of(job, reason)
                ],
            }
        )
    return {"now": now, "until": found.until, "passes": found.passes, "jobs": jobs}


__all__ = ["MAX_PASSES", "forecast_records", "out_of_service"]
