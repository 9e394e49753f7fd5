"""Summaries of a simulation: completion time, queueing delay, makespan, utilisation,
preemptions and finish-time fairness (Themis' rho)."""

from __future__ import annotations

import math
from typing import Any

from podium.sched.model import TeamRules
from podium.sim.engine import SimResult


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _demand(job: Any) -> float:
    """The GPUs a task asked for: its part of one GPU (gpu_milli), else its count."""
    milli = getattr(job, "gpu_milli", 0)
    return milli / 1000 if 0 < milli < 1000 else float(job.gpus)


def summarize(result: SimResult) -> dict[str, Any]:
    """Averages and percentiles over every replayed job, an unfinished one counted
    until the replay's last end (a lower bound; `unfinished` says how many).
    `gpu_util` is the GPUs held over the cluster's GPU-time (a whole GPU for a
    rounded-up fraction); `used_util` what the finished tasks asked for (their
    gpu_milli) over the same.

    rho = JCT / T_alone, where T_alone is the job's duration on 1/N of the cluster's
    GPUs, N being the jobs in the system when it arrived (slower in proportion when
    that share is less than it asks for). rho <= 1 means the job did no worse than
    on its fair share of a private cluster.

    `elastic_avg_jct_s` is over the jobs picked to be elastic (run rigid in the
    `requeue` mode: the same jobs either way); `high_avg_wait_s` over high-QoS jobs.
    """
    done = [o for o in result.outcomes if o.end is not None and o.first_start is not None]
    ends = [o.end for o in done if o.end is not None]
    starts = [o.first_start for o in done if o.first_start is not None]
    jct = [end - o.job.submit_time for o, end in zip(done, ends, strict=True)]
    wait = [start - o.job.submit_time for o, start in zip(done, starts, strict=True)]
    first = min((o.job.submit_time for o in result.outcomes), default=0.0)
    last = max(ends, default=first)
    # a job the replay left unfinished counts until its last event, a lower bound, in
    # every average and percentile (never left out: a policy that starves is seen)
    unfinished = [o for o in result.outcomes if o.end is None or o.first_start is None]
    all_jct = jct + [max(0.0, last - o.job.submit_time) for o in unfinished]
    all_wait = wait + [
        (o.first_start if o.first_start is not None else max(last, o.job.submit_time))
        - o.job.submit_time
        for o in unfinished
    ]
    makespan = max(0.0, last - first)
    busy = sum(o.gpu_seconds for o in result.outcomes)
    capacity = result.total_gpus * makespan
    util = busy / capacity if capacity else 0.0
    used = sum(_demand(o.job) * o.job.duration for o in done)  # what the tasks asked for
    useful = used / capacity if capacity else 0.0
    rho = []
    for o, time_shared in zip(done, jct, strict=True):
        share = result.total_gpus / max(1, o.contenders_at_arrival)
        alone = o.job.duration * max(1.0, o.job.gpus / share) if o.job.gpus else o.job.duration
        rho.append(time_shared / alone if alone > 0 else 1.0)
    slowdown = [t / max(o.job.duration, SLOWDOWN_FLOOR_S) for o, t in zip(done, jct, strict=True)]
    per_user: dict[tuple[str, str], list[float]] = {}
    for o, sd in zip(done, slowdown, strict=True):
        per_user.setdefault((o.job.account, o.job.user), []).append(sd)
    elastic_jct = [t for o, t in zip(done, jct, strict=True) if o.elastic]
    high_wait = [w for o, w in zip(done, wait, strict=True) if o.job.qos == "high"]
    return {
        "policy": result.policy,
        "jobs": len(result.outcomes),
        "finished": len(done),
        "unfinished": len(unfinished),
        "unschedulable": len(result.unschedulable),
        "avg_jct_s": round(_mean(all_jct), 1),
        "p50_jct_s": round(_pct(all_jct, 50), 1),
        "p95_jct_s": round(_pct(all_jct, 95), 1),
        "p99_jct_s": round(_pct(all_jct, 99), 1),
        "avg_wait_s": round(_mean(all_wait), 1),
        "p50_wait_s": round(_pct(all_wait, 50), 1),
        "p99_wait_s": round(_pct(all_wait, 99), 1),
        "p999_wait_s": round(_pct(all_wait, 99.9), 1),
        "max_wait_s": round(max(all_wait, default=0.0), 1),
        "makespan_s": round(makespan, 1),
        "gpu_util": round(util, 4),
        "used_util": round(useful, 4),
        "preemptions": result.preemptions,
        "resizes": result.resizes,
        "elastic_jobs": sum(1 for o in result.outcomes if o.elastic),
        "elastic_avg_jct_s": round(_mean(elastic_jct), 1),
        "high_avg_wait_s": round(_mean(high_wait), 1),
        "lost_gpu_s": round(sum(o.lost_seconds * o.job.gpus for o in result.outcomes), 1),
        "max_slowdown": round(max(slowdown, default=0.0), 1),
        "jain_users": round(jain([_mean(v) for v in per_user.values()]), 3),
        "rho_avg": round(_mean(rho), 3),
        "rho_p99": round(_pct(rho, 99), 3),
        "rho_max": round(max(rho, default=0.0), 3),
        "rho_le_1": round(sum(1 for r in rho if r <= 1.0) / len(rho), 3) if rho else 0.0,
    }


SLOWDOWN_FLOOR_S = 10.0  # bounded slowdown: JCT over the runtime, or this at least
WAIT_FLOOR_S = 60.0  # waits compared between policies: a minute of waiting is noise


def jain(values: list[float]) -> float:
    """Jain's fairness index of `values`: 1 when all are equal, 1/n at worst."""
    if not values:
        return 1.0
    square = sum(v * v for v in values)
    return sum(values) ** 2 / (len(values) * square) if square else 1.0


def wait_ratio_max(result: SimResult, baseline: SimResult) -> float:
    """The most any job waited under `result` relative to under `baseline` (the same
    trace): max over jobs of (wait + 60 s) / (baseline wait + 60 s)."""
    before = {
        o.job.job_id: o.first_start - o.job.submit_time
        for o in baseline.outcomes
        if o.first_start is not None
    }
    ratios = [
        (o.first_start - o.job.submit_time + WAIT_FLOOR_S) / (before[o.job.job_id] + WAIT_FLOOR_S)
        for o in result.outcomes
        if o.first_start is not None and o.job.job_id in before
    ]
    return max(ratios, default=1.0)


SLOWED_FLOOR_S = 60.0  # completion times compared between policies: both floored at this


def slowdown_vs(result: SimResult, baseline: SimResult) -> dict[str, float]:
    """How each job's completion time compares with the same job's under `baseline`
    (the same trace), both floored at SLOWED_FLOOR_S so that a job of seconds is not
    "slowed" by a pass interval: the shares of jobs slowed more than 2x and more than
    4x, how many more than 10x, and the worst ratio. A job `result` left unfinished
    counts as slowed past every bound."""
    before = {
        o.job.job_id: o.end - o.job.submit_time for o in baseline.outcomes if o.end is not None
    }
    ratios = [
        math.inf
        if o.end is None
        else max(o.end - o.job.submit_time, SLOWED_FLOOR_S)
        / max(before[o.job.job_id], SLOWED_FLOOR_S)
        for o in result.outcomes
        if o.job.job_id in before
    ]
    if not ratios:
        return {"slowed_2x": 0.0, "slowed_4x": 0.0, "slowed_10x": 0, "worst": 1.0}
    return {
        "slowed_2x": sum(r > 2.0 for r in ratios) / len(ratios),
        "slowed_4x": sum(r > 4.0 for r in ratios) / len(ratios),
        "slowed_10x": sum(r > 10.0 for r in ratios),
        "worst": max(ratios),
    }


def team_summary(result: SimResult, rules: TeamRules) -> list[dict[str, Any]]:
    """Each team's share of the GPU-hours used, and its jobs' waits (jobs of no team
    as "(none)"), in config order."""
    names = [t.name for t in rules.teams] + ["(none)"]
    used = dict.fromkeys(names, 0.0)
    waits: dict[str, list[float]] = {n: [] for n in names}
    for o in result.outcomes:
        name = _team_name(rules, o)
        used[name] += o.gpu_seconds
        if o.first_start is not None:
            waits[name].append(o.first_start - o.job.submit_time)
    total = sum(used.values())
    return [
        {
            "team": n,
            "jobs": sum(1 for o in result.outcomes if _team_name(rules, o) == n),
            "gpu_hours": round(used[n] / 3600, 1),
            "gpu_share": round(used[n] / total, 4) if total else 0.0,
            "avg_wait_s": round(_mean(waits[n]), 1),
            "p99_wait_s": round(_pct(waits[n], 99), 1),
        }
        for n in names
        if n != "(none)" or waits[n] or used[n]
    ]


def _team_name(rules: TeamRules, outcome: Any) -> str:
    team = rules.team_of(outcome.job.user, outcome.job.account)
    return team.name if team is not None else "(none)"
