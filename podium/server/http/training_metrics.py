"""/metrics' families of what running jobs say of their training (podium
progress, their ranks' step seconds), apart from podium.server.http.prometheus_metrics
so each stays one job's size."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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


def rank_families(
    ranks: Mapping[int, Mapping[int, float]],
    stragglers: Mapping[int, int],
    users: Mapping[int, str],
) -> Iterator[Metric]:
    """Each rank's last step seconds outside the collectives, as the ranks said
    (podium.run.rank_beats), and the straggler of each job that has one."""
    seconds = GaugeMetricFamily(
        "podium_rank_step_seconds",
        "Seconds a rank's last step took outside the collectives, as it said",
        labels=["job_id", "user", "rank"],
    )
    slow = GaugeMetricFamily(
        "podium_job_straggler_rank",
        f"The rank named a straggler (slow at most looks over the last {WINDOW_S:g} s), per job",
        labels=["job_id", "user"],
    )
    for job_id, by_rank in sorted(ranks.items()):
        user = users.get(job_id, "")
        for rank, value in sorted(by_rank.items()):
            seconds.add_metric([str(job_id), user, str(rank)], value)
        if job_id in stragglers:
            slow.add_metric([str(job_id), user], stragglers[job_id])
    yield seconds
    yield slow


__all__ = ["progress_families", "rank_families"]
