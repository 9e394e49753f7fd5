"""Placement that follows the network, from one cluster definition to both engines
(tests/integration/slurm_testbed_switches.yaml: nodes 1-2 on leaf switch s1, 3-4 on s2):
- Slurm: `podium slurm render` writes topology.conf (topology/tree), up.sh gives each
  switch a bridge of its own, and `--switches=1` keeps a 2-node job on one switch
  where any two free nodes would span both;
- Kubernetes: `podium k8s apply topology` labels the nodes and makes Kueue's Topology
  and a topology-aware flavor, and the same `--switches=1` gets a topology-aware
  admission on one rack."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.k8s_cluster import start_cluster as start_k8s
from tests.integration.k8s_cluster import wait_for
from tests.integration.slurm_cluster import SlurmCluster, in_service
from tests.integration.slurm_cluster import start_cluster as start_slurm
from tests.integration.test_k8s_backend import PODIUM, SLOW, Podium

# One worker runs the "slurm-clusters" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("slurm-clusters")]
DEFINITION = Path(__file__).with_name("slurm_testbed_switches.yaml")
SWITCH = {"debug-st-g-1": "s1", "debug-st-g-2": "s1", "debug-st-g-3": "s2", "debug-st-g-4": "s2"}


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    for cluster in start_slurm(port_base=19000, hosts=True, definition=DEFINITION):
        yield in_service(cluster)


def _submit(slurm: SlurmCluster, *args: str) -> int:
    out = slurm.podium("submit", "--parsable", "-o", "/dev/null", *args).stdout
    return int(out.strip().split(";")[0])


def test_slurm_gets_the_tree_and_each_switch_is_a_bridge(slurm: SlurmCluster) -> None:
    conf = (slurm.directory / "etc" / "topology.conf").read_text()
    assert "SwitchName=rack-s1 Nodes=debug-st-g-1,debug-st-g-2" in conf
    assert "SwitchName=block-b1 Switches=rack-s1,rack-s2" in conf
    assert re.search(r"TopologyPlugin\s*=\s*topology/tree", slurm.scontrol("show", "config"))
    env = (slurm.directory / "etc" / "testbed.env").read_text()
    tb_id = next(line.split("=", 1)[1] for line in env.splitlines() if line.startswith("TB_ID="))
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    link = {line.split()[1].split("@")[0]: line for line in links.splitlines()}
    # host 3's link hangs off switch 2's bridge, which an uplink joins to switch 1's
    assert f"master pdmb{tb_id}s2 " in link[f"pdm{tb_id}h3"]
    assert f"master pdmb{tb_id} " in link[f"pdm{tb_id}u2"]


def test_switches_1_keeps_a_two_node_job_on_one_switch(slurm: SlurmCluster) -> None:
    held = _submit(slurm, "--exclusive", "-w", "debug-st-g-2", "--wrap", "sleep 300")
    slurm.wait_job(held, {"RUNNING"})
    try:
        # free: node 1 (switch s1), nodes 3 and 4 (s2); any two would be nodes 1 and 3
        job = _submit(slurm, "-N2", "--exclusive", "--switches=1", "--wrap", "sleep 300")
        running = slurm.wait_job(job, {"RUNNING"})
        assert running["nodes"] == ["debug-st-g-3", "debug-st-g-4"]
        assert "Switches=1@" in slurm.scontrol("show", "job", str(job))
        # one switch cannot fit another: --switches=1 waits, a job without it runs
        other = _submit(slurm, "-N2", "--switches=1@5:00", "--exclusive", "--wrap", "sleep 300")
        held_back = slurm.wait_job(other, {"PENDING"})
        assert held_back["state"] == "PENDING"
        slurm.podium("cancel", str(job))
        slurm.wait_job(other, {"RUNNING"})
        assert {SWITCH[n] for n in slurm.json("show", str(other))["nodes"]} == {"s2"}
        slurm.podium("cancel", str(other))
    finally:
        slurm.podium("cancel", str(held), check=False)


@pytest.fixture(scope="module")
def kube() -> Iterator[tuple[Path, Any]]:
    yield from start_k8s(19700)


def test_kueue_admits_switches_1_on_one_rack(kube: tuple[Path, Any]) -> None:
    directory, api = kube
    lab = Podium(
        directory, "net", pod_annotations=SLOW, image="busybox:1.36",
        switch_label="podium.dev/network-rack", local_queue="switched",
    )  # fmt: skip
    applied = lab.ok(
        "k8s", "apply", "topology", str(DEFINITION), "--node-name", "kwok-node-{n}",
        "--kubeconfig", str(directory / "kubeconfig"),
    )  # fmt: skip
    assert "applied Topology/podiumtest-network" in applied
    assert "applied ResourceFlavor/podiumtest-network" in applied
    node = api.call("GET", "/api/v1/nodes/kwok-node-3")[1]
    assert node["metadata"]["labels"]["podium.dev/network-rack"] == "s2"
    assert "kwok.x-k8s.io/node" in node["metadata"]["annotations"]  # kwok's own: untouched
    gpus = int(node["status"]["capacity"]["nvidia.com/gpu"])
    for doc in yaml.safe_load_all(
        f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: switched}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: podiumtest-network
      resources:
      - {{name: cpu, nominalQuota: 256}}
      - {{name: memory, nominalQuota: 2048Gi}}
      - {{name: nvidia.com/gpu, nominalQuota: {4 * gpus}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: switched, namespace: default}}
spec: {{clusterQueue: switched}}
"""
    ):
        api.apply(doc)
    wait_for(
        api, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/switched",
        lambda q: any(c["type"] == "Active" and c["status"] == "True"
                      for c in q.get("status", {}).get("conditions", [])),
    )  # fmt: skip
    per_node = f"--gpus-per-node={gpus}"
    first = lab.submit("-N", "1", per_node, "--wrap", "train")
    taken = lab.wait(first, lambda r: r["state"] == "RUNNING" and r["nodes"])["nodes"][0]
    rack = {f"kwok-node-{i}": "s1" if i <= 2 else "s2" for i in range(1, 5)}
    job = lab.submit("-N", "2", per_node, "--switches=1", "--wrap", "train")
    running = lab.wait(job, lambda r: r["state"] == "RUNNING" and len(r["nodes"]) == 2)
    assert {rack[n] for n in running["nodes"]} == {"s1", "s2"} - {rack[taken]}
    workload = running["kueue"]["workload"]
    wl = api.call("GET", f"/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads/{workload}")[1]
    assert wl["spec"]["podSets"][0]["topologyRequest"]["required"] == "podium.dev/network-rack"
    # Kueue's own placement (v1beta2: hostnames given as a prefix and roots) names
    # the nodes the pods run on, both on the free rack
    assignment = wl["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert assignment["levels"] == ["kubernetes.io/hostname"], json.dumps(assignment)
    hosts = assignment["slices"][0]["valuesPerLevel"][0]["individual"]
    assert sorted(hosts["prefix"] + root for root in hosts["roots"]) == sorted(running["nodes"])
    refused = lab("submit", "-N", "2", per_node, "--switches=2", "--wrap", "train")
    assert refused.returncode != 0 and "ask for --switches=1" in refused.stderr
    lab.ok("cancel", str(first), str(job))


def test_switches_without_a_topology_is_refused_in_one_line(kube: tuple[Path, Any]) -> None:
    plain = Podium(kube[0], "plain", image="busybox:1.36")
    refused = plain("submit", "-N", "2", "--switches=1", "--wrap", "train")
    assert refused.returncode == 2 and "this cluster has no network topology" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


__all__ = ["PODIUM"]
