"""Intake: a submission is checked whole and stored, or refused with nothing stored."""

from __future__ import annotations

import pytest

from podium.api.selection import JobFilter
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import SubmitRequest
from tests.unit.server.harness import ME, Cluster


def _req(c: Cluster, *options: str) -> SubmitRequest:
    return SubmitRequest(wrap="true", options=list(options), cwd=str(c.work))


def test_a_submission_is_stored_pending_with_its_spec(c: Cluster) -> None:
    job = c.submit("--gpus=1", "-J", "train")
    row = c.store.job(job)
    assert (row["state"], row["name"], row["user"], row["uid"]) == (
        "PENDING",
        "train",
        "alice",
        1000,
    )
    assert c.reactor.spec(row).gpus == 1


def test_a_refused_submission_stores_nothing(c: Cluster) -> None:
    for options, error in (
        (("--gpus=9",), Unsatisfiable),
        (("--reservation=r1",), SpecError),
        (("--partition=nope",), SpecError),
    ):
        with pytest.raises(error):
            c.intake.submit(_req(c, *options), ME._replace(cwd=str(c.work)), 100.0)
    assert c.store.jobs(JobFilter(finished=True)) == []


def test_test_only_answers_without_storing(c: Cluster) -> None:
    req = _req(c, "--gpus=2").model_copy(update={"test_only": True})
    answer = c.intake.submit(req, ME._replace(cwd=str(c.work)), 100.0)
    assert answer.jobs[0]["gpus"] == 2
    assert c.store.jobs(JobFilter(finished=True)) == []


def test_a_batch_is_all_or_none_and_its_key_is_answered_once(c: Cluster) -> None:
    who = ME._replace(cwd=str(c.work))
    with pytest.raises(Unsatisfiable, match="job 2 of 2"):
        c.intake.submit_batch([_req(c, "--gpus=1"), _req(c, "--gpus=9")], who, 100.0, "k1")
    assert c.store.jobs(JobFilter(finished=True)) == []
    ids = c.intake.submit_batch([_req(c), _req(c, "--array=0-2")], who, 100.0, "k2")
    assert len(ids) == 2 and len(ids[1]) == 1
    again = c.intake.submit_batch([_req(c), _req(c, "--array=0-2")], who, 100.0, "k2")
    assert again == ids  # a retried request stores nothing new
