"""Views: listings through one JobFilter, a job in full for its user, the node."""

from __future__ import annotations

import json

import pytest

from podium.api.selection import JobFilter, Selection
from podium.errors import PermissionDenied, SpecError
from tests.unit.server.harness import ADMIN, BOB, ME, Cluster


def test_a_listing_shows_current_jobs_unless_asked_for_more(c: Cluster) -> None:
    done = c.submit("--gpus=1", "-J", "done")
    c.reactor.tick()
    c.end(done)
    c.reactor.collect()
    running = c.submit("--gpus=2", "-J", "run")
    c.reactor.tick()
    waiting = c.submit("-J", "wait", who=BOB)
    ids = [j["job_id"] for j in c.views.jobs(JobFilter())]
    assert ids == [running, waiting]
    every = [j["job_id"] for j in c.views.jobs(JobFilter(finished=True))]
    assert every == [done, running, waiting]
    assert [j["job_id"] for j in c.views.jobs(JobFilter(user="bob"))] == [waiting]
    assert [j["job_id"] for j in c.views.jobs(JobFilter(name="run"))] == [running]
    assert [j["job_id"] for j in c.views.jobs(JobFilter(states=("COMPLETED",)))] == [done]


def test_a_cancelled_running_job_is_listed_completing_until_it_ends(c: Cluster) -> None:
    job = c.submit("--gpus=1")
    c.reactor.tick()
    c.control.cancel(ME, Selection((job,)))
    (listed,) = c.views.jobs(JobFilter(states=("COMPLETING",)))
    assert (listed["job_id"], listed["state"]) == (job, "COMPLETING")


def test_jobs_json_gives_only_the_fields_asked_for(c: Cluster) -> None:
    job = c.submit("--gpus=1", "-J", "x")
    table = json.loads(c.views.jobs_json(JobFilter(), ["job_id", "name"]))
    assert table == {"fields": ["job_id", "name"], "rows": [[job, "x"]]}
    with pytest.raises(SpecError, match="'nope' is not a job record key"):
        c.views.jobs_json(JobFilter(), ["job_id", "nope"])
    full = json.loads(c.views.jobs_json(JobFilter()))["jobs"]
    assert full == c.views.jobs(JobFilter())


def test_a_job_in_full_is_for_its_user_and_admins(c: Cluster) -> None:
    job = c.submit("--gpus=1", "--comment=hi")
    shown = c.views.show(job, ME)
    assert shown["script"].startswith("#!") and shown["spec"]["comment"] == "hi"
    assert "environment" not in shown["spec"]  # values may be secret
    assert c.views.show(job, ADMIN)["job_id"] == job
    with pytest.raises(PermissionDenied, match=f"job {job} belongs to alice"):
        c.views.show(job, BOB)


def test_accounting_lists_jobs_that_ran_with_their_steps(c: Cluster) -> None:
    ran = c.submit("--gpus=1")
    c.reactor.tick()
    c.end(ran)
    c.reactor.collect()
    never = c.submit("--hold")
    jobs = c.views.acct(JobFilter(finished=True))
    assert [j["job_id"] for j in jobs] == [ran] and never not in [j["job_id"] for j in jobs]
    assert isinstance(jobs[0]["steps"], list)


def test_the_node_shows_its_gpus_and_drain(c: Cluster) -> None:
    c.control.drain(ADMIN, c.node.name, "fan")
    (node,) = c.views.nodes()
    assert node["node"] == c.node.name and node["gpus_total"] == 2
    assert node["reason"] == "fan"
