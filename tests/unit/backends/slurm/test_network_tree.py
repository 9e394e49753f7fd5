"""A definition's network layers: validated as a tree, rendered as Slurm's
topology.conf (topology/tree) and as Kueue's Topology, flavor and node labels."""

from __future__ import annotations

import pytest

from podium.backends.kubernetes.kueue_topology import leaf_label, topology_manifests
from podium.backends.slurm.conf_files import render
from podium.backends.slurm.definition import load_definition
from podium.backends.slurm.network_tree import network_topology, topology_conf
from podium.errors import ConfigError


def _definition(network: str, count: int = 4, dynamic: int = 0) -> str:
    return f"""ClusterName: lab
Scheduling:
  SlurmQueues:
    - Name: gpu
      ComputeResources:
        - Name: h
          Cpus: 8
          Gpus: {{Count: 8, Type: h100}}
          MinCount: {count}
          MaxCount: {count + dynamic}
          Network: {network}
"""


TWO_RACKS = (
    "[{Nodes: 1-2, Layers: {block: b1, rack: r1}}, {Nodes: '3,4', Layers: {block: b1, rack: r2}}]"
)


def test_two_racks_in_one_block_make_a_tree() -> None:
    defn = load_definition(_definition(TWO_RACKS), "c.yaml")
    assert topology_conf(defn) == (
        "# topology.conf rendered by `podium slurm render` (TopologyPlugin=topology/tree):\n"
        "# layers block, rack, top first.\n"
        "SwitchName=rack-r1 Nodes=gpu-st-h-1,gpu-st-h-2\n"
        "SwitchName=rack-r2 Nodes=gpu-st-h-3,gpu-st-h-4\n"
        "SwitchName=block-b1 Switches=rack-r1,rack-r2\n"
    )
    files = render(defn, "/usr/bin/python3")
    assert "TopologyPlugin=topology/tree" in files["slurm.conf"]
    assert files["topology.conf"] == topology_conf(defn)


def test_several_top_domains_are_joined_under_one_root() -> None:
    network = "[{Nodes: 1-2, Layers: {rack: r1}}, {Nodes: 3-4, Layers: {rack: r2}}]"
    conf = topology_conf(load_definition(_definition(network), "c.yaml"))
    assert conf is not None and conf.endswith("SwitchName=podium-root Switches=rack-r1,rack-r2\n")


def test_dynamic_nodes_are_placed_by_their_position_after_the_static_ones() -> None:
    network = "[{Nodes: 1-2, Layers: {rack: r1}}, {Nodes: 3-4, Layers: {rack: r2}}]"
    topo = network_topology(load_definition(_definition(network, 2, 2), "c.yaml"))
    assert topo is not None
    assert topo.nodes == {"gpu-st-h-1": ("r1",), "gpu-st-h-2": ("r1",),
                          "gpu-dy-h-1": ("r2",), "gpu-dy-h-2": ("r2",)}  # fmt: skip


def test_hyperpods_layer_names_are_accepted_and_kept_as_node_labels() -> None:
    layer = "topology.k8s.aws/network-node-layer-"
    network = (
        f"[{{Nodes: 1-2, Layers: {{{layer}1: nn-a, {layer}2: nn-b, {layer}3: nn-c}}}}, "
        f"{{Nodes: 3-4, Layers: {{{layer}1: nn-a, {layer}2: nn-b, {layer}3: nn-d}}}}]"
    )
    defn = load_definition(_definition(network), "c.yaml")
    conf = topology_conf(defn)
    assert conf is not None and "SwitchName=layer3-nn-c Nodes=gpu-st-h-1,gpu-st-h-2" in conf
    assert "SwitchName=layer1-nn-a Switches=layer2-nn-b" in conf
    topo = network_topology(defn)
    assert topo is not None and leaf_label(topo) == f"{layer}3"
    docs = topology_manifests(topo, "lab", {"gpu-st-h-1": "ip-10-0-0-1"})
    assert docs[0]["metadata"] == {
        "name": "ip-10-0-0-1",
        "labels": {f"{layer}1": "nn-a", f"{layer}2": "nn-b", f"{layer}3": "nn-c",
                   "podium.dev/network": "lab"},
    }  # fmt: skip
    assert docs[-2]["spec"]["levels"][-1] == {"nodeLabel": "kubernetes.io/hostname"}
    assert docs[-1]["spec"] == {
        "nodeLabels": {"podium.dev/network": "lab"}, "topologyName": "lab-network",
    }  # fmt: skip


def test_no_layers_no_topology() -> None:
    defn = load_definition(_definition("[]"), "c.yaml")
    assert topology_conf(defn) is None and "topology.conf" not in render(defn, "python3")
    assert "TopologyPlugin" not in render(defn, "python3")["slurm.conf"]


@pytest.mark.parametrize(
    ("network", "words"),
    [
        ("[{Nodes: 1-2, Layers: {rack: r1}}]", "Network places 2 of its 4 nodes"),
        ("[{Nodes: 1-4, Layers: {rack: r1}}, {Nodes: 4, Layers: {rack: r2}}]", "placed twice"),
        ("[{Nodes: 1-5, Layers: {rack: r1}}]", "expected positions within 1-4"),
        ("[{Nodes: 1-4, Layers: {switch: s1}}]", "use one family of layer names"),
        ("[{Nodes: 1-2, Layers: {rack: r1}}, {Nodes: 3-4, Layers: {block: b1}}]",
         "every node needs the same layers"),
        ("[{Layers: {rack: 'r 1'}}]", "expected letters, digits"),
        ("[{Nodes: 1-2, Layers: {block: b1, rack: r1}}, {Nodes: 3-4, Layers: {block: b2, "
         "rack: r1}}]", "rack=r1: it sits in both block=b1 and b2"),
        ("[{Nodes: 'one', Layers: {rack: r1}}]", "Network.0.Nodes"),
    ],
)  # fmt: skip
def test_bad_networks_are_one_line_errors(network: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")) as err:
        load_definition(_definition(network), "c.yaml")
    assert "\n" not in str(err.value)
