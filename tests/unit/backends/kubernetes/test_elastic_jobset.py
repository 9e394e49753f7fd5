"""Elastic jobs on Kubernetes, the pure parts: the JobSet of an elastic submission, its
next generation at another size, what `podium show` reads of it, and when the
controller shrinks or grows it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from podium.api.caller import Caller
from podium.backends.kubernetes.admission import KubernetesAdmission
from podium.backends.kubernetes.elastic_control import ElasticControl, preemptors
from podium.backends.kubernetes.elastic_jobset import elastic_fields, next_generation
from podium.backends.kubernetes.translate import Target, manifests
from podium.config.cluster import ClusterConfig, default_config
from podium.errors import SpecError
from podium.jobspec.build import SubmitRequest, build_job

CONFIG = ClusterConfig.model_validate(
    {**default_config(gpus=0, cpus=8).model_dump(), "backend": "kubernetes",
     "qos": [{"name": "high", "priority": 1000, "preempt": ["low"]},
             {"name": "normal", "priority": 100}, {"name": "low", "priority": 10}]}
)  # fmt: skip


def _docs(options: list[str]) -> list[dict[str, Any]]:
    req = SubmitRequest(options=options, cwd="/w", environment={}, script="#!/bin/bash\n")
    who = Caller(uid=1000, gid=1000, name="alice")
    spec = build_job(req, CONFIG, who, 1_800_000_000.0, KubernetesAdmission("default")).spec
    return manifests(
        spec, Target("ns", "default", image="busybox"), 7, {"gpus": spec.gpus, "qos": spec.qos}
    )


ELASTIC = ["--elastic=1:4", "--gpus-per-task=8", "--resize-grace=30", "--qos=low"]


def test_an_elastic_job_is_a_jobset_of_one_pod_per_replica() -> None:
    _config_map, jobset = _docs(ELASTIC)
    assert (
        jobset["kind"] == "JobSet" and jobset["metadata"]["labels"]["podium.dev/elastic"] == "1-4-1"
    )
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 1  # MIN, until sized at submission
    pod = job["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert elastic_fields(jobset) == {"replicas": 1, "replicas_min": 1, "replicas_max": 4,
                                      "resizes": 0, "resize_log": []}  # fmt: skip


def test_the_next_generation_is_renamed_resized_and_logged() -> None:
    config_map, jobset = _docs(ELASTIC)
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"][
        "kueue.x-k8s.io/podset"
    ] = "workers"  # Kueue's, at admission
    script, new = next_generation(jobset, config_map, 3, "grow 1->3 into unused quota", 100.0)
    name = new["metadata"]["name"]
    assert name == "wrap-7-r1" and script["metadata"]["name"] == "wrap-7-r1-script"
    job = new["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 3
    pod = job["template"]
    assert "kueue.x-k8s.io/podset" not in pod["metadata"]["labels"]
    assert pod["metadata"]["labels"]["podium.dev/job"] == name
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["WORLD_SIZE"] == "3" and env["PODIUM_RESIZE_COUNT"] == "1"
    assert env["MASTER_ADDR"] == f"{name}-workers-0-0.{name}"
    assert pod["spec"]["volumes"][0]["configMap"]["name"] == f"{name}-script"
    assert json.loads(new["metadata"]["annotations"]["podium.dev/record"])["gpus"] == 24
    _again, newer = next_generation(new, script, 2, "shrink 3->2 for JobSet x", 200.0)
    assert newer["metadata"]["name"] == "wrap-7-r2"  # not wrap-7-r1-r2
    assert [(e["from"], e["to"]) for e in elastic_fields(newer)["resize_log"]] == [(1, 3), (3, 2)]


def _workload(gpus: int, priority_class: str, admitted: bool) -> dict[str, Any]:
    return {"metadata": {"ownerReferences": [{"kind": "JobSet", "name": "urgent"}]},
            "spec": {"priorityClassRef": {"name": priority_class}, "priority": 1000,
                     "podSets": [{"count": 1, "template": {"spec": {"containers": [
                         {"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}}]},
            "status": {"conditions": [{"type": "QuotaReserved",
                                       "status": "True" if admitted else "False"}]}}  # fmt: skip


@pytest.mark.parametrize(
    ("room", "waiting", "expected"),
    [((32, 32), [_workload(8, "high", False)], (3, "shrink 4->3 for JobSet urgent")),
     ((32, 32), [_workload(8, "normal", False)], None),  # normal may not shrink low
     ((32, 24), [_workload(8, "high", False)], None),  # it fits in the unused quota
     ((32, 8), [], (4, "grow 1->4 into unused quota")),
     ((32, 8), [_workload(8, "normal", False)], None)],  # something waits: no growth
)  # fmt: skip
def test_the_controller_shrinks_for_a_preempting_qos_and_grows_into_unused_quota(
    room: tuple[int, int], waiting: list[dict[str, Any]], expected: tuple[int, str] | None
) -> None:
    _, jobset = _docs(ELASTIC)
    size = 4 if room[1] == 32 else 1
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = size
    jobset["metadata"]["annotations"]["podium.dev/sized-at"] = "0"
    control = ElasticControl(api=None, shrinks_for=preemptors(CONFIG.qos), grow_delay_s=0)  # type: ignore[arg-type]
    assert control.change(jobset, waiting, room, now=1000.0, qos="low") == expected


def test_an_elastic_job_without_gpus_per_replica_is_refused() -> None:
    with pytest.raises(SpecError, match="give --gpus-per-task"):
        _docs(["--elastic=1:4"])


class _Api:
    """What the controller lists, and nothing it may change."""

    def __init__(self, objects: dict[str, list[dict[str, Any]]]) -> None:
        self.lists = objects

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return self.lists.get(kind, [])


def test_the_controller_decides_by_what_the_user_cannot_edit() -> None:
    """Issue 60, item 8: the controller took a job's QoS and its last resize time from
    the JobSet's annotations, which its user may edit (to dodge a shrink, or the grow
    delay). Now the QoS is the Workload's priority class (Kueue's) and the resize time
    the JobSet's creationTimestamp (the API server's)."""
    _, jobset = _docs(ELASTIC)
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 4
    jobset["metadata"]["annotations"]["podium.dev/record"] = json.dumps({"qos": "high"})
    control = ElasticControl(api=None, shrinks_for=preemptors(CONFIG.qos), grow_delay_s=60)  # type: ignore[arg-type]
    urgent = [_workload(8, "high", False)]
    assert control.change(jobset, urgent, (32, 32), 1000.0, qos="low") == (
        3, "shrink 4->3 for JobSet urgent")  # fmt: skip
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 1
    jobset["metadata"]["annotations"]["podium.dev/sized-at"] = "0"  # "long ago"
    jobset["metadata"]["creationTimestamp"] = "2026-11-29T00:00:00Z"  # 30 s before now
    assert control.change(jobset, [], (32, 8), 1_795_910_430.0, qos="low") is None
    assert control.change(jobset, [], (32, 8), 1_795_910_461.0, qos="low") == (
        4, "grow 1->4 into unused quota")  # fmt: skip


def _api_of(jobset: dict[str, Any], workload: dict[str, Any]) -> _Api:
    jobset["metadata"]["uid"] = "u1"
    workload["metadata"]["ownerReferences"] = [{"uid": "u1"}]
    workload["spec"]["queueName"] = "default"
    return _Api({"JobSet": [jobset], "Workload": [workload],
                 "LocalQueue": [{"metadata": {"name": "default"}, "spec": {"clusterQueue": "cq"}}],
                 "ClusterQueue": [{"metadata": {"name": "cq"}, "spec": {}}]})  # fmt: skip


def test_a_jobset_with_odd_annotations_stops_no_other() -> None:
    """A user's own JobSet that cannot be read (its size gone): the pass says so in one
    line and goes on (it raised, and the controller stopped for everyone, before)."""
    _, jobset = _docs(ELASTIC)
    del jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"]
    api = _api_of(jobset, _workload(8, "low", True))
    control = ElasticControl(api=api, shrinks_for=preemptors(CONFIG.qos), grow_delay_s=0)  # type: ignore[arg-type]
    (line,) = control.look(now=1000.0)
    assert line.startswith("wrap-7: left as it is: unreadable (KeyError")
    jobset["metadata"]["annotations"]["podium.dev/resize-log"] = '{"not": "a list"}'
    assert elastic_fields(jobset) == {}  # `podium queue` reads it as a plain job


def test_spares_are_refused_saying_why_and_what_instead() -> None:
    """Issue 63: --spares on Kubernetes is refused in one line that says why (no standby
    pod takes a failed pod's rank yet), where the design is, and what to do instead."""
    with pytest.raises(SpecError) as refused:
        _docs([*ELASTIC[:2], "--elastic=2:2", "--spares=1"])
    said = str(refused.value)
    assert "\n" not in said and "docs/kubernetes.md#spares" in said and "--auto-resume" in said


def test_torchft_is_refused_saying_why() -> None:
    """--torchft runs the lighthouse and restarts one replica group on the embedded
    cluster; on Kubernetes it is refused in one line, not run half-way."""
    with pytest.raises(SpecError) as refused:
        _docs([*ELASTIC[:2], "--elastic=2:2", "--torchft"])
    said = str(refused.value)
    assert "\n" not in said and "not on Kubernetes yet" in said and "#torchft" in said
