"""Elastic jobs on Kubernetes, on the real test cluster (kube-apiserver, Kueue, JobSet,
kwok): `--elastic=1:4 --gpus-per-task=8` is a JobSet of one pod per replica, started at
what the ClusterQueue has unused, shrunk by `podium k8s elastic` for a waiting
workload whose priority class may preempt its QoS, and grown back into unused quota
when the others end: each resize the job's next JobSet, admitted by Kueue, and the
ClusterQueue's usage (Kueue's own status) never above its quota. kwok's pods run no
process, so what the ranks do with the resize (save at SIGTERM) is the other
backends' tests'."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.k8s_cluster import start_cluster
from tests.integration.test_k8s_backend import SLOW, Podium

pytestmark = pytest.mark.integration
KUEUE = "kueue.x-k8s.io/v1beta2"
QOS = [
    {"name": "high", "priority": 1000, "preempt": ["low"]},
    {"name": "normal", "priority": 100},
    {"name": "low", "priority": 10},
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, Any]]:
    yield from start_cluster(19500)


@pytest.fixture(scope="module")
def lab(cluster: tuple[Path, Any]) -> Podium:
    directory, api = cluster
    for q in QOS:
        api.apply({"apiVersion": KUEUE, "kind": "WorkloadPriorityClass",
                   "metadata": {"name": q["name"]}, "value": q["priority"]})  # fmt: skip
    podium = Podium(directory, "elastic", pod_annotations=SLOW, image="busybox:1.36")
    config = yaml.safe_load(podium.config.read_text())
    config.update(qos=QOS, elastic={"grow_delay": "0:01"})
    podium.config.write_text(yaml.safe_dump(config))
    return podium


def _usage(api: Any) -> tuple[int, int]:
    """The ClusterQueue's GPU usage and nominal quota, as Kueue reports them."""
    queue = api.call("GET", f"/apis/{KUEUE}/clusterqueues/podium")[1]
    nominal = sum(
        int(r["nominalQuota"]) for g in queue["spec"]["resourceGroups"]
        for f in g["flavors"] for r in f["resources"] if r["name"] == "nvidia.com/gpu"
    )  # fmt: skip
    used = sum(
        int(r.get("total", 0)) for f in queue.get("status", {}).get("flavorsUsage", [])
        for r in f["resources"] if r["name"] == "nvidia.com/gpu"
    )  # fmt: skip
    return used, nominal


def test_an_elastic_jobset_shrinks_for_a_higher_qos_and_grows_back_within_quota(
    cluster: tuple[Path, Any], lab: Podium
) -> None:
    _, api = cluster
    samples: list[tuple[int, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(_usage(api))
            stop.wait(0.2)

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    try:
        per_node = "--gpus-per-node=8"
        blocker = lab.submit("--qos=normal", "-N", "2", per_node, "--wrap", "train")
        lab.wait(blocker, lambda r: r["state"] == "RUNNING" and len(r["nodes"]) == 2)
        job = lab.submit("--qos=low", "--elastic=1:4", "--gpus-per-task=8",
                         "--resize-grace=5", "--wrap", "train")  # fmt: skip
        two = lab.wait(job, lambda r: r["state"] == "RUNNING" and r.get("replicas") == 2
                       and len(r["nodes"]) == 2)  # fmt: skip
        assert two["kind"] == "JobSet" and two["gpus"] == 16
        urgent = lab.submit("--qos=high", "-N", "1", per_node, "--wrap", "train")
        lab.wait(urgent, lambda r: r["state"] == "PENDING" and r["reason"] == "Resources")
        assert (
            lab.ok("k8s", "elastic", "--once", "--config", str(lab.config)).count("shrink 2->1")
            == 1
        )
        # the old JobSet's pods get the 5 s grace (kwok deletes each at a random time
        # within it) before the new one's can be placed on their nodes, and
        # kube-scheduler retries an unschedulable pod with a backoff (1 s in the testbed)
        one = lab.wait(job, lambda r: r["state"] == "RUNNING" and r.get("replicas") == 1
                       and len(r["nodes"]) == 1, timeout=180)  # fmt: skip
        assert one["k8s_name"].endswith("-r1") and one["gpus"] == 8
        lab.wait(urgent, lambda r: r["state"] == "RUNNING", timeout=180)
        lab.ok("cancel", str(blocker), str(urgent))
        for _ in range(60):  # until Kueue has given back the quota of both
            if _usage(api)[0] == 8:
                break
            stop.wait(0.5)
        grown = lab.ok("k8s", "elastic", "--once", "--config", str(lab.config))
        assert "grow 1->4" in grown, grown
        four = lab.wait(job, lambda r: r["state"] == "RUNNING" and r.get("replicas") == 4
                        and len(r["nodes"]) == 4, timeout=180)  # fmt: skip
        assert [(e["from"], e["to"]) for e in four["resize_log"]] == [(2, 1), (1, 4)]
        jobset = api.call(
            "GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{four['k8s_name']}"
        )[1]
        pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["WORLD_SIZE"] == "4" and env["PODIUM_RESIZE_COUNT"] == "2"
        assert pod["terminationGracePeriodSeconds"] == 5
        queue = json.loads(lab.ok("queue", "--json"))
        assert len([j for j in queue if j["job_id"] == job]) == 1  # one job, not two
        lab.ok("cancel", str(job))
    finally:
        stop.set()
        watcher.join()
    assert samples and all(used <= nominal for used, nominal in samples), max(samples)
