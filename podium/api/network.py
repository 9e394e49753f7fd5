"""Where nodes sit in the network: the layers of a cluster definition (block, rack,
NVLink domain; or HyperPod's network-node layers), as every engine's renderer reads
them. Pure data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class NetworkTopology:
    """`levels`: the layer names, top first. `nodes`: each node's domain in every level
    (same order), e.g. {"debug-st-g-1": ("b1", "r1")}."""

    levels: tuple[str, ...]
    nodes: Mapping[str, tuple[str, ...]]

    def leaf_domains(self) -> dict[str, list[str]]:
        """The lowest layer's domains (leaf switches), each with its nodes in order."""
        out: dict[str, list[str]] = {}
        for node, domains in self.nodes.items():
            out.setdefault(domains[-1], []).append(node)
        return out
