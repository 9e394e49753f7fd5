"""/metrics' families of what running jobs say of their training (podium
progress, their ranks' step seconds), apart from podium.server.http.prometheus_metrics
so each stays one job's size."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from statistics import median
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from podium.api.progress import Progress
from podium.recover.stragglers import WINDOW_S


def progress_families(said: Sequence[tuple[Any, Progress]]) -> Iterator[Metric]:
    """What running jobs said of their progress (podium progress), and the ends it gives."""
    done = GaugeMetricFamily("podium_job_progress_ratio",
                             "How much of its work a running job says it has done",
                             labels=["job_id", "user"])  # fmt: skip
    ends = GaugeMetricFamily("podium_job_expected_end_timestamp_seconds",
                             "When a running job's reported rate says it ends",
                             labels=["job_id", "user"])  # fmt: skip
    for job, progress in said:
        labels = [str(job["job_id"]), job["user"]]
        done.add_metric(labels, progress.fraction)
        end = progress.expected_end()
        if end is not None:
            ends.add_metric(labels, end)
    yield done
    yield ends


MAX_RANKS_PER_JOB = 64  # a job with more ranks is shown by its spread, not rank by rank
MAX_RANK_SERIES = 512  # per-rank series in one scrape, all jobs together


def rank_families(
    ranks: Mapping[int, Mapping[int, float]],
    stragglers: Mapping[int, int],
    users: Mapping[int, str],
) -> Iterator[Metric]:
    """The ranks' last step seconds outside the collectives, as they said
    (podium.run.rank_beats), and the straggler of each job that has one. A scrape stays
    small whatever users' jobs write (/metrics may be open to anyone): every job has
    its spread (min, median, max, ranks reporting), and rank-by-rank series are given
    for jobs of at most MAX_RANKS_PER_JOB ranks, MAX_RANK_SERIES in all (jobs by id),
    plus each job's straggler."""
    seconds = GaugeMetricFamily(
        "podium_rank_step_seconds",
        "Seconds a rank's last step took outside the collectives, as it said (jobs of at "
        f"most {MAX_RANKS_PER_JOB} ranks, and each job's straggler; {MAX_RANK_SERIES} in all)",
        labels=["job_id", "user", "rank"],
    )
    spread = GaugeMetricFamily(
        "podium_job_step_seconds",
        "The spread of a job's ranks' last step seconds outside the collectives",
        labels=["job_id", "user", "stat"],
    )
    reporting = GaugeMetricFamily(
        "podium_job_ranks_reporting", "Ranks of a job that said their step seconds",
        labels=["job_id", "user"],
    )  # fmt: skip
    slow = GaugeMetricFamily(
        "podium_job_straggler_rank",
        f"The rank named a straggler (slow at most looks over the last {WINDOW_S:g} s), per job",
        labels=["job_id", "user"],
    )
    room = MAX_RANK_SERIES
    for job_id, by_rank in sorted(ranks.items()):
        if not by_rank:
            continue
        user, job = users.get(job_id, ""), str(job_id)
        values = sorted(by_rank.values())
        for stat, value in (("min", values[0]), ("median", median(values)), ("max", values[-1])):
            spread.add_metric([job, user, stat], value)
        reporting.add_metric([job, user], len(values))
        shown = sorted(by_rank) if len(by_rank) <= MAX_RANKS_PER_JOB else []
        if job_id in stragglers and stragglers[job_id] in by_rank and not shown:
            shown = [stragglers[job_id]]
        for rank in shown[:room]:
            seconds.add_metric([job, user, str(rank)], by_rank[rank])
        room -= min(room, len(shown))
        if job_id in stragglers:
            slow.add_metric([job, user], stragglers[job_id])
    yield seconds
    yield spread
    yield reporting
    yield slow


__all__ = ["MAX_RANKS_PER_JOB", "MAX_RANK_SERIES", "progress_families", "rank_families"]
