"""/metrics' rank families stay small whatever users' jobs write (issue 60, item 6):
11 jobs of 4,096 ranks gave 45,230 series, 3.1 MB a scrape."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from podium.server.http.training_metrics import MAX_RANK_SERIES, rank_families


class _Ranks:
    def __init__(self, ranks: Mapping[int, Mapping[int, float]], slow: Mapping[int, int]) -> None:
        self.ranks, self.slow = ranks, slow

    def collect(self) -> Iterator[Metric]:
        users = {job: f"user{job}" for job in self.ranks}
        yield from rank_families(self.ranks, self.slow, users)


def _scrape(ranks: Mapping[int, Mapping[int, float]], slow: Mapping[int, int]) -> str:
    registry = CollectorRegistry()
    registry.register(_Ranks(ranks, slow))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def test_eleven_jobs_of_4096_ranks_scrape_under_100_kb() -> None:
    ranks = {job: {r: 0.05 + r * 1e-6 for r in range(4096)} for job in range(1, 12)}
    text = _scrape(ranks, {3: 4000})
    assert len(text.encode()) < 100_000, len(text.encode())
    assert text.count("podium_rank_step_seconds{") == 1  # the straggler of job 3 alone
    assert 'podium_rank_step_seconds{job_id="3",rank="4000",user="user3"}' in text
    assert 'podium_job_step_seconds{job_id="7",stat="max",user="user7"} 0.054095' in text
    assert 'podium_job_ranks_reporting{job_id="11",user="user11"} 4096.0' in text


def test_small_jobs_keep_their_ranks_series_within_the_bound() -> None:
    ranks = {job: {r: 0.1 for r in range(64)} for job in range(1, 21)}
    text = _scrape(ranks, {})
    assert text.count("podium_rank_step_seconds{") == MAX_RANK_SERIES  # 20 x 64 = 1280 asked
    assert 'podium_rank_step_seconds{job_id="1",rank="63",user="user1"}' in text
    assert 'podium_job_step_seconds{job_id="20",stat="median",user="user20"} 0.1' in text
