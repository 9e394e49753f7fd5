"""The Kubernetes test cluster (scripts/k8s-testbed): a real control plane built from
source modules at the pinned versions (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler), Kueue and JobSet with their webhooks, kwok's GPU nodes. A 2-node JobSet
is admitted by Kueue and completes; a job larger than the queue's quota is not admitted;
Kueue's CRDs validate; down.sh stops everything up.sh started.

The first run builds the components (about 13 minutes on 2 cores, cached after in
~/.cache/podium-k8s); a build that cannot reach the Go module proxy skips."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.k8s_cluster import start_cluster, wait_for

PORT_BASE = 19300

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, Any]]:
    yield from start_cluster(PORT_BASE)


_wait = wait_for


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def _apply(api: Any, doc: dict[str, Any]) -> None:
    api.apply(doc)


def _jobset(
    name: str, pods: int, gpus: int, namespace: str = "default", run_for: str | None = None
) -> dict[str, Any]:
    """A JobSet of `pods` pods of `gpus` GPUs in `namespace`'s LocalQueue `default`;
    kwok completes its pods after `run_for` (a duration; default: a second or so)."""
    delay = {"pod-complete.stage.kwok.x-k8s.io/delay": run_for} if run_for else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "default"},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": pods,
                            "completions": pods,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": {
                                "metadata": {"annotations": delay},
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "trainer",
                                            "image": "pytorch/pytorch:2.5",
                                            "resources": {
                                                "requests": {"nvidia.com/gpu": gpus, "cpu": "1"},
                                                "limits": {"nvidia.com/gpu": gpus},
                                            },
                                        }
                                    ],
                                },
                            },
                        }
                    },
                }
            ]
        },
    }


def test_the_cluster_has_gpu_nodes_and_serves_kueue_v1beta2(cluster: tuple[Path, Any]) -> None:
    directory, api = cluster
    nodes = _wait(api, "/api/v1/nodes", lambda d: len(d["items"]) == 4)
    for node in nodes["items"]:
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        assert _conditions(node)["Ready"] == "True"
    status, version = api.call("GET", "/version")
    assert status == 200 and version["gitVersion"] == "v1.35.4"
    status, queue = api.call("GET", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/podium")
    assert status == 200 and _conditions(queue).get("Active") == "True", queue
    assert "backend: kubernetes" in (directory / "podium.yaml").read_text()


def test_a_two_node_jobset_is_admitted_by_kueue_and_completes(cluster: tuple[Path, Any]) -> None:
    _, api = cluster
    _apply(api, _jobset("two-nodes", pods=2, gpus=8))
    done = _wait(
        api,
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/two-nodes",
        lambda js: _conditions(js).get("Completed") == "True",
    )
    assert (
        done["spec"].get("suspend") is False
    )  # Kueue's webhook suspended it, admission resumed it
    workloads = api.call("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads")[1]
    ours = [w for w in workloads["items"] if w["metadata"]["name"].startswith("jobset-two-nodes")]
    assert len(ours) == 1 and _conditions(ours[0])["Admitted"] == "True", ours
    pods = api.call("GET", "/api/v1/namespaces/default/pods")[1]["items"]
    mine = [p for p in pods if p["metadata"]["name"].startswith("two-nodes-")]
    assert {p["status"]["phase"] for p in mine} == {"Succeeded"}
    assert len({p["spec"]["nodeName"] for p in mine}) == 2  # 8 GPUs each: two nodes


def test_a_job_larger_than_the_quota_is_not_admitted(cluster: tuple[Path, Any]) -> None:
    _, api = cluster
    _apply(api, _jobset("too-big", pods=5, gpus=8))  # 40 GPUs; the queue has 32
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
    workload = _wait(
        api,
        path,
        lambda d: any(
            w["metadata"]["name"].startswith("jobset-too-big") and _conditions(w)
            for w in d["items"]
        ),
    )
    big = next(w for w in workload["items"] if w["metadata"]["name"].startswith("jobset-too-big"))
    conditions = {c["type"]: c for c in big["status"]["conditions"]}
    assert conditions["QuotaReserved"]["status"] == "False"
    assert "insufficient quota" in conditions["QuotaReserved"]["message"], conditions
    js = api.call("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/too-big")[1]
    assert js["spec"]["suspend"] is True


def test_kueue_webhooks_and_the_apiserver_refuse_bad_objects(cluster: tuple[Path, Any]) -> None:
    _, api = cluster
    bad_quota = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "bad"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [{"name": "cpu", "nominalQuota": -1}],
                        }
                    ],
                }
            ]
        },
    }
    with pytest.raises(RuntimeError, match=r"webhook .* denied the request: .*nominalQuota"):
        api.apply(bad_quota)  # Kueue's validating webhook, reached on loopback
    no_name = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
               "metadata": {"name": "Bad_Name", "namespace": "default"}, "spec": {}}  # fmt: skip
    with pytest.raises(RuntimeError, match="422"):
        api.apply(no_name)  # the apiserver's own validation of the CRD's object


def test_podiums_manifests_are_admitted_and_run_across_two_nodes(
    cluster: tuple[Path, Any],
) -> None:
    """The manifests podium.backends.kubernetes.translate writes for `-N 2
    --gpus-per-node 8`: created as they are, Kueue admits the JobSet, JobSet gives pod 0
    the name MASTER_ADDR holds, and the pods complete on two nodes."""
    from podium.api.caller import Caller
    from podium.backends.kubernetes.admission import KubernetesAdmission
    from podium.backends.kubernetes.translate import Target, manifests
    from podium.config.cluster import default_config
    from podium.jobspec.build import SubmitRequest, build_job

    _, api = cluster
    options = ["--job-name=Llama Run", "-N", "2", "--ntasks-per-node=8", "--gpus-per-node=8",
               "--container-image=nvcr.io/nvidia/pytorch:24.05-py3", "--time=10"]  # fmt: skip
    request = SubmitRequest(
        options=options, cwd="/work", environment={}, script="#!/bin/bash\ntorchrun t.py\n"
    )
    config = default_config(gpus=0, cpus=8).model_copy(update={"backend": "kubernetes"})
    who = Caller(uid=1000, gid=1000, name="alice")
    spec = build_job(request, config, who, time.time(), KubernetesAdmission("default")).spec
    docs = manifests(spec, Target(namespace="default", local_queue="default"))
    for doc in docs:
        api.apply(doc)
    name = docs[1]["metadata"]["name"]
    _wait(
        api,
        f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{name}",
        lambda js: _conditions(js).get("Completed") == "True",
    )
    pods = api.call("GET", "/api/v1/namespaces/default/pods")[1]["items"]
    mine = [p for p in pods if p["metadata"]["labels"].get("podium.dev/job") == name]
    assert len(mine) == 2 and len({p["spec"]["nodeName"] for p in mine}) == 2
    first = next(p for p in mine if p["spec"]["hostname"].endswith("-workers-0-0"))
    env = {e["name"]: e.get("value") for e in first["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == f"{first['spec']['hostname']}.{first['spec']['subdomain']}"
    assert first["spec"]["activeDeadlineSeconds"] == 600


def _workload(api: Any, namespace: str, owner: str) -> dict[str, Any]:
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/workloads"
    found = _wait(
        api, path, lambda d: any(w["metadata"]["name"].startswith(f"jobset-{owner}-")
                                 for w in d["items"])
    )  # fmt: skip
    return next(w for w in found["items"] if w["metadata"]["name"].startswith(f"jobset-{owner}-"))


def test_a_team_borrows_idle_quota_and_loses_it_when_the_owner_submits(
    cluster: tuple[Path, Any],
) -> None:
    """`podium k8s render teams` for two accounts of equal shares on the cluster's 32
    GPUs: 16 each in one cohort. Alpha runs 24 GPUs, borrowing 8 of Beta's idle quota;
    when Beta submits 16, Kueue reclaims: Alpha's workload is preempted and Beta's
    admitted."""
    from podium.backends.kubernetes.teams import Capacity, teams
    from podium.config.cluster import ClusterConfig

    _, api = cluster
    config = ClusterConfig.model_validate(
        {"node": {"name": "n", "cpus": 8, "memory_mb": 16000,
                  "gpus": {"source": "declared", "count": 8, "type": "h100"}},
         "qos": [{"name": "normal", "priority": 100}],
         "accounts": [{"name": "alpha", "shares": 1}, {"name": "beta", "shares": 1}]}
    )  # fmt: skip
    for doc in teams(config, Capacity(32, 256, 2048), prefix="t-", cohort="teams"):
        api.apply(doc)
    kueue = "/apis/kueue.x-k8s.io/v1beta2"
    for team in ("t-alpha", "t-beta"):
        _wait(
            api, f"{kueue}/clusterqueues/{team}", lambda q: _conditions(q).get("Active") == "True"
        )
    api.apply(_jobset("wide", pods=3, gpus=8, namespace="t-alpha", run_for="10m"))
    _wait(
        api,
        f"{kueue}/namespaces/t-alpha/workloads",
        lambda d: any(_conditions(w).get("Admitted") == "True" for w in d["items"]),
    )

    def gpus_used(queue: dict[str, Any]) -> dict[str, str]:
        usage = queue["status"].get("flavorsUsage") or [{"resources": []}]
        found = [r for r in usage[0]["resources"] if r["name"] == "nvidia.com/gpu"]
        return found[0] if found else {}

    queue = _wait(
        api, f"{kueue}/clusterqueues/t-alpha", lambda q: gpus_used(q).get("total") == "24"
    )
    assert gpus_used(queue)["borrowed"] == "8", queue["status"]  # 8 of Beta's idle quota
    api.apply(_jobset("owner", pods=2, gpus=8, namespace="t-beta", run_for="10m"))
    _wait(
        api,
        f"{kueue}/namespaces/t-beta/workloads",
        lambda d: any(_conditions(w).get("Admitted") == "True" for w in d["items"]),
        timeout=90,
    )
    alpha = _workload(api, "t-alpha", "wide")
    preempted = {c["type"]: c for c in alpha["status"]["conditions"]}
    assert preempted["Preempted"]["status"] == "True", preempted
    assert preempted["Preempted"]["reason"] == "InCohortReclamation", preempted


def test_podium_applies_teams_and_a_bad_config_is_one_line(
    cluster: tuple[Path, Any], tmp_path: Path
) -> None:
    """`podium k8s apply teams` through lightkube: every object applied and validated
    by the real apiserver and Kueue's webhooks; applying again changes nothing; a
    kubeconfig that does not exist is one line and exit 2."""
    directory, api = cluster
    config = tmp_path / "cluster.yaml"
    config.write_text(
        "qos: [{name: normal, priority: 100}, {name: urgent, priority: 900}]\n"
        "accounts: [{name: robotics, shares: 3, max_gpus: 20}, {name: speech, shares: 1}]\n"
    )
    podium = str(Path(sys.executable).parent / "podium")
    sizes = ["--gpus", "32", "--cpus", "256", "--memory-gi", "2048"]
    args = [podium, "k8s", "apply", "teams", "--config", str(config), *sizes,
            "--prefix", "lab-", "--cohort", "lab"]  # fmt: skip
    for _ in range(2):  # server-side apply: the second run is a no-op, not an error
        done = subprocess.run(
            [*args, "--kubeconfig", str(directory / "kubeconfig")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "applied ClusterQueue/lab-robotics" in done.stdout
        assert "applied WorkloadPriorityClass/urgent" in done.stdout
    queue = _wait(
        api,
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/lab-robotics",
        lambda q: _conditions(q).get("Active") == "True",
    )
    gpu = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": 24, "borrowingLimit": 0}
    missing = subprocess.run(
        [*args, "--kubeconfig", str(tmp_path / "nope")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "cannot use the Kubernetes config" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1, missing.stderr
