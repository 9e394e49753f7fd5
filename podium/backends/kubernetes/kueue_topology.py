"""A cluster definition's network layers -> Kueue's Topology-Aware Scheduling.

What `podium k8s render topology` prints (and `apply topology` applies), in order:
- each node's layer labels: Podium's layer names become `podium.dev/network-LAYER`
  (block, rack, nvlink); HyperPod's are node labels already and are kept as named;
  every node also gets `podium.dev/network: CLUSTER`, which the flavor selects;
- a Topology whose levels are those labels, top first, then `kubernetes.io/hostname`
  (Kueue assigns pods to single nodes at that level);
- a topology-aware ResourceFlavor naming it. The ClusterQueues that should place jobs
  by the network use this flavor.

Jobs ask the Slurm way: `--switches=1` is Kueue's `podset-required-topology` on the
lowest layer (one leaf switch), `--switches=1@TIME` its `podset-preferred-topology`
(Slurm waits up to TIME for one switch, then takes any nodes; Kueue tries one domain
and falls back at once). Pure.
"""

from __future__ import annotations

from typing import Any

from podium.api.network import NetworkTopology
from podium.backends.kubernetes.teams import KUEUE

CLUSTER_LABEL = "podium.dev/network"
HOSTNAME_LABEL = "kubernetes.io/hostname"


def level_label(level: str) -> str:
    """The node label of a layer: HyperPod's names as they are, Podium's prefixed."""
    return level if "/" in level else f"podium.dev/network-{level}"


def topology_manifests(
    topo: NetworkTopology, cluster: str, node_names: dict[str, str]
) -> list[dict[str, Any]]:
    """Node label patches, the Topology and the ResourceFlavor (both named
    `CLUSTER-network`), in the order to apply them. `node_names` maps the definition's
    node names to the Kubernetes nodes' (a node missing from it keeps its name)."""
    name = f"{cluster}-network"
    docs: list[dict[str, Any]] = []
    for node, domains in topo.nodes.items():
        labels = {level_label(lvl): d for lvl, d in zip(topo.levels, domains, strict=True)}
        labels[CLUSTER_LABEL] = cluster
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node_names.get(node, node), "labels": labels},
            }
        )
    levels = [{"nodeLabel": level_label(lvl)} for lvl in topo.levels]
    docs.append(
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [*levels, {"nodeLabel": HOSTNAME_LABEL}]},
        }
    )
    docs.append(
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": {CLUSTER_LABEL: cluster}, "topologyName": name},
        }
    )
    return docs


def leaf_label(topo: NetworkTopology) -> str:
    """The label of the lowest layer: what `--switches=1` keeps a job within."""
    return level_label(topo.levels[-1])


__all__ = ["leaf_label", "level_label", "topology_manifests"]
