"""HyperPod's resiliency and task governance on the real test cluster, through Podium:
`podium k8s agent` per kwok node (its kernel log a file of its own) fences a node on a
GPU fault (label, taint, eviction), a `--auto-resume` job restarts on other nodes with
its restart count, an application error is not restarted, the node comes back only
after a deep check Job pinned to it passes; and a team borrowing idle quota loses it
when the owner submits (Kueue's reclaim, seen in `podium show`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.node.health.xid import xid_text
from podium.node.inventory import declared_bus_id
from tests.integration.k8s_cluster import start_cluster, wait_for
from tests.integration.test_k8s_backend import PODIUM, SLOW, Podium

pytestmark = pytest.mark.integration
HEALTH = "sagemaker.amazonaws.com/node-health-status"
DEEP = "sagemaker.amazonaws.com/deep-health-check-status"
APP_ERROR = {"pod-complete.stage.kwok.x-k8s.io/weight": "0", "kwok.podium.dev/exit-code": "3"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, Any]]:
    yield from start_cluster(19600)


@pytest.fixture(scope="module")
def lab(cluster: tuple[Path, Any]) -> Podium:
    """Jobs that run for an hour; the agent's config: 8 declared GPUs per node, each
    node's kernel log a file of its own, a GPU reset that always works."""
    directory = cluster[0]
    podium = Podium(directory, "lab", pod_annotations=SLOW, image="busybox:1.36")
    config = yaml.safe_load(podium.config.read_text())
    config["node"] = {"gpus": {"source": "declared", "count": 8, "type": "h100"}}
    config["health"] = {"kernel_log": str(directory / "kern-{node}.log"), "reset_command": "true"}
    podium.config.write_text(yaml.safe_dump(config))
    for i in range(1, 5):
        (directory / f"kern-kwok-node-{i}.log").touch()
    return podium


def _agent(lab: Podium, node: str) -> subprocess.CompletedProcess[str]:
    return lab("k8s", "agent", "--node", node, "--once")


def _xid(lab: Podium, node: str, code: int) -> None:
    """An Xid line in `node`'s kernel log (after the agent's first pass there, which
    starts reading at the end of the log)."""
    if not (lab.home / "k8s-agent" / node / "xid-offset.json").exists():
        assert _agent(lab, node).returncode == 0
    bus = declared_bus_id(1, str(lab.home / "k8s-agent" / node))
    with open(lab.config.parent / f"kern-{node}.log", "a") as log:
        log.write(f"[ 100.0] {xid_text(bus, code)}\n")


def _node(api: Any, name: str) -> dict[str, Any]:
    return dict(api.call("GET", f"/api/v1/nodes/{name}")[1])


def _gpu_usage(queue: dict[str, Any]) -> list[dict[str, str]]:
    """A ClusterQueue's usage of its first flavor ([] before Kueue first writes it)."""
    flavors = queue.get("status", {}).get("flavorsUsage") or [{}]
    return list(flavors[0].get("resources", []))


def test_a_gpu_fault_fences_the_node_and_the_job_resumes_on_others(
    cluster: tuple[Path, Any], lab: Podium
) -> None:
    _, api = cluster
    job_id = lab.submit("-N", "2", "--gpus-per-node=8", "--auto-resume=2", "--wrap", "train")
    running = lab.wait(job_id, lambda r: r["state"] == "RUNNING" and len(r["nodes"]) == 2)
    victim = running["nodes"][0]
    for node in [f"kwok-node-{i}" for i in range(1, 5)]:  # healthy: nothing changes
        assert _agent(lab, node).returncode == 0
    assert HEALTH not in _node(api, victim)["metadata"]["labels"]

    _xid(lab, victim, 48)  # double-bit ECC: drain and reset the GPU
    fenced = _agent(lab, victim)
    assert fenced.returncode == 2, fenced.stderr
    node = _node(api, victim)
    assert node["metadata"]["labels"][HEALTH] == "Unschedulable"
    assert {"key": HEALTH, "value": "Unschedulable", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    assert node["metadata"]["annotations"]["podium.dev/drain-reason"].startswith(
        "podium: xid: Xid 48"
    )

    def back_on_two(record: dict[str, Any]) -> bool:
        return (
            record["restart_count"] == 1
            and record["state"] == "RUNNING"
            and len(record["nodes"]) == 2
        )

    resumed = lab.wait(job_id, back_on_two, timeout=120)
    assert victim not in resumed["nodes"]
    pods = api.call("GET", "/api/v1/namespaces/default/pods")[1]["items"]
    live = [p for p in pods if p["metadata"]["name"] in resumed["pods"]]
    assert {p["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for p in live} == {"1"}
    env = {e["name"]: e.get("valueFrom") for e in live[0]["spec"]["containers"][0]["env"]}
    assert "restart-attempt" in env["PODIUM_RESTART_COUNT"]["fieldRef"]["fieldPath"]
    shown = {n["node"]: n for n in json.loads(lab.ok("nodes", "--json"))}
    assert shown[victim]["health"]["label"] == "unschedulable-drained"

    back = _agent(lab, victim)  # the reset is done: deep check, then Schedulable
    assert back.returncode == 0, back.stderr
    node = _node(api, victim)
    assert node["metadata"]["labels"][HEALTH] == "Schedulable"
    assert node["metadata"]["labels"][DEEP] == "Passed"
    assert not [t for t in node["spec"].get("taints") or [] if t["key"] == HEALTH]
    jobs = api.call("GET", "/apis/batch/v1/namespaces/default/jobs")[1]["items"]
    checks = [j for j in jobs if j["metadata"]["name"].startswith(f"podium-deep-check-{victim}")]
    assert checks and checks[0]["spec"]["template"]["spec"]["nodeName"] == victim
    lab.ok("cancel", str(job_id))


def test_an_application_error_is_not_restarted(cluster: tuple[Path, Any]) -> None:
    failing = Podium(cluster[0], "failing", pod_annotations=APP_ERROR, image="busybox:1.36")
    job_id = failing.submit("-N", "2", "--gpus-per-node=8", "--auto-resume=2", "--wrap", "x")

    # Kueue writes its workload's Finished message after the JobSet fails: wait for both
    # (a run read the state between the two, "Quota reserved" still the message).
    def failed(r: dict[str, Any]) -> bool:
        return r["state"] == "FAILED" and "FailJobSet" in (
            (r.get("kueue") or {}).get("message") or ""
        )

    ended = failing.wait(job_id, failed)
    assert ended["exit_code"] == 3 and ended["restart_count"] == 0


def test_a_reboot_fault_waits_for_the_reboot(cluster: tuple[Path, Any], lab: Podium) -> None:
    _, api = cluster
    _xid(lab, "kwok-node-4", 79)  # fallen off the bus: the node needs a reboot
    assert _agent(lab, "kwok-node-4").returncode == 2
    assert _node(api, "kwok-node-4")["metadata"]["labels"][HEALTH] == "UnschedulablePendingReboot"
    again = _agent(lab, "kwok-node-4")  # same boot id: still waiting, no deep check
    assert again.returncode == 0
    node = _node(api, "kwok-node-4")
    assert node["metadata"]["labels"][HEALTH] == "UnschedulablePendingReboot"
    assert DEEP not in node["metadata"]["labels"]
    lab.ok("resume", "kwok-node-4")  # an administrator's word lifts the fence
    node = _node(api, "kwok-node-4")
    assert node["metadata"]["labels"][HEALTH] == "Schedulable" and not node["spec"].get("taints")
    assert _agent(lab, "kwok-node-4").returncode == 0  # and the agent lets it be
    bad = lab("k8s", "agent", "--node", "Bad Node;", "--once")
    assert bad.returncode == 2 and "expected a node's name" in bad.stderr


def test_a_team_borrows_idle_quota_and_loses_it_when_the_owner_submits(
    cluster: tuple[Path, Any], tmp_path: Path
) -> None:
    """Two accounts of equal shares on 32 GPUs (16 each, one cohort): alpha's 24-GPU
    job borrows 8 of beta's idle quota; when beta submits 16, Kueue reclaims them and
    `podium show` says alpha's job was preempted."""
    directory, api = cluster
    config = tmp_path / "teams.yaml"
    config.write_text("accounts: [{name: alpha, shares: 1}, {name: beta, shares: 1}]\n")
    done = subprocess.run(
        [PODIUM, "k8s", "apply", "teams", "--config", str(config), "--gpus", "32", "--cpus",
         "256", "--memory-gi", "2048", "--prefix", "t-", "--cohort", "teams",
         "--kubeconfig", str(directory / "kubeconfig")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    alpha = Podium(directory, "alpha", namespace="t-alpha", pod_annotations=SLOW,
                   image="busybox:1.36")  # fmt: skip
    beta = Podium(directory, "beta", namespace="t-beta", pod_annotations=SLOW,
                  image="busybox:1.36")  # fmt: skip
    wide = alpha.submit("-N", "3", "--gpus-per-node=8", "--wrap", "train")
    alpha.wait(wide, lambda r: r["state"] == "RUNNING", timeout=90)
    borrowing = {"name": "nvidia.com/gpu", "total": "24", "borrowed": "8"}
    # Kueue writes a ClusterQueue's usage in its own time, after the admission
    wait_for(api, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/t-alpha",
             lambda queue: borrowing in _gpu_usage(queue))  # fmt: skip
    owner = beta.submit("-N", "2", "--gpus-per-node=8", "--wrap", "train")
    beta.wait(owner, lambda r: r["state"] == "RUNNING", timeout=90)
    preempted = alpha.wait(wide, lambda r: r["state"] == "PENDING")
    assert preempted["reason"] == "Preempted", preempted["kueue"]
    assert "(Preempted)" in alpha.ok("queue")
    alpha.ok("cancel", str(wide))
    beta.ok("cancel", str(owner))
