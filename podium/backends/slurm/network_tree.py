"""A cluster definition's network layers -> Slurm's topology.conf (topology/tree).

Slurm's tree is made of switches: the lowest layer's domains are leaf switches, which
list their nodes; each layer above is a switch listing the switches below it; several
top domains are joined under one root switch, since Slurm can place a job only where
one switch reaches all its nodes. A switch is named LAYER-DOMAIN (`rack-r1`; HyperPod's
layers shortened to `layer1`..`layer3`, `ultraserver`).

topology/block (Slurm 23.11 and later) is not rendered: Debian 12's Slurm, the one the
test cluster runs, is 22.05. Pure.
"""

from __future__ import annotations

from podium.api.network import NetworkTopology
from podium.backends.slurm.definition import ClusterDefinition, network_levels
from podium.backends.slurm.network_layers import HYPERPOD_LAYER
from podium.backends.slurm.slurm_conf import nodes

ROOT_SWITCH = "podium-root"


def network_topology(defn: ClusterDefinition) -> NetworkTopology | None:
    """Each node's domains (node names as slurm.conf gives them); None without layers."""
    levels = network_levels(defn)
    if not levels:
        return None
    placed: dict[str, tuple[str, ...]] = {}
    for node in nodes(defn):
        res = node.resource
        kind, _, position = node.name.rpartition("-")
        index = int(position) + (res.MinCount if "-dy-" in kind else 0)
        for placement in res.Network:
            if index in placement.positions(res.MaxCount):
                placed[node.name] = tuple(placement.Layers[level] for level in levels)
    return NetworkTopology(levels, placed)


def switch_name(level: str, domain: str) -> str:
    """LAYER-DOMAIN, a name Slurm accepts for a switch."""
    short = level.replace(HYPERPOD_LAYER, "layer").replace("topology.k8s.aws/", "")
    return f"{short.removesuffix('-id')}-{domain}"


def topology_conf(defn: ClusterDefinition) -> str | None:
    """topology.conf for topology/tree; None when the definition has no layers."""
    topo = network_topology(defn)
    if topo is None:
        return None
    lines = [
        "# topology.conf rendered by `podium slurm render` (TopologyPlugin=topology/tree):",
        f"# layers {', '.join(topo.levels)}, top first.",
    ]
    for domain, members in topo.leaf_domains().items():
        lines.append(f"SwitchName={switch_name(topo.levels[-1], domain)} Nodes={','.join(members)}")
    for depth in range(len(topo.levels) - 2, -1, -1):
        below: dict[str, list[str]] = {}
        for domains in topo.nodes.values():
            child = switch_name(topo.levels[depth + 1], domains[depth + 1])
            children = below.setdefault(domains[depth], [])
            if child not in children:
                children.append(child)
        for domain, children in below.items():
            name = switch_name(topo.levels[depth], domain)
            lines.append(f"SwitchName={name} Switches={','.join(children)}")
    tops = list(dict.fromkeys(d[0] for d in topo.nodes.values()))
    if len(tops) > 1:
        joined = ",".join(switch_name(topo.levels[0], d) for d in tops)
        lines.append(f"SwitchName={ROOT_SWITCH} Switches={joined}")
    return "\n".join(lines) + "\n"


__all__ = ["ROOT_SWITCH", "network_topology", "switch_name", "topology_conf"]
