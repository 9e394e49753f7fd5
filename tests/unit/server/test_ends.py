"""A run's end: recorded, requeued by its exit code or auto-resume, or final."""

from __future__ import annotations

from tests.unit.server.harness import Cluster


def _run(c: Cluster, *options: str) -> int:
    job = c.submit("--gpus=1", *options)
    c.reactor.tick()
    assert c.state(job) == "RUNNING"
    return job


def test_a_failed_run_is_final_without_auto_resume(c: Cluster) -> None:
    job = _run(c)
    c.end(job, "FAILED", 3)
    c.reactor.collect()
    row = c.store.job(job)
    assert (row["state"], row["exit_code"], row["restart_count"]) == ("FAILED", 3, 0)


def test_a_requeue_exit_code_queues_the_job_again(c: Cluster) -> None:
    job = _run(c, "--requeue-exit=75", "--auto-resume=1")
    c.end(job, "FAILED", 75)
    c.reactor.collect()
    row = c.store.job(job)
    assert (row["state"], row["restart_count"]) == ("PENDING", 1)


def test_a_timeout_is_recorded_as_such(c: Cluster) -> None:
    job = _run(c, "--time=1")
    c.end(job, "TIMEOUT", 0)
    c.reactor.collect()
    assert c.state(job) == "TIMEOUT"
    assert c.effects.forgotten == [(job, "TIMEOUT")]
