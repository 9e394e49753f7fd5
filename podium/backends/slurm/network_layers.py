"""Where a cluster definition's nodes sit in the network: each compute resource's
`Network` placements, and the rules that make them a tree (as Slurm's topology/tree
and Kueue's Topology need it). Pure; `definition` validates with it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

# The network layers a definition may name, each list from the top layer down: Podium's
# own words, or the node labels SageMaker HyperPod puts on its nodes. One definition
# uses one list.
HYPERPOD_LAYER = "topology.k8s.aws/network-node-layer-"
LAYER_NAMES: tuple[tuple[str, ...], ...] = (
    ("block", "rack", "nvlink"),
    (f"{HYPERPOD_LAYER}1", f"{HYPERPOD_LAYER}2", f"{HYPERPOD_LAYER}3",
     "topology.k8s.aws/ultraserver-id"),
)  # fmt: skip
_LAYER_VALUE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")


class NetworkPlacement(BaseModel):
    """Where some of a compute resource's nodes sit in the network: `Nodes`, positions
    in the resource (1-based: its static nodes first, then its dynamic ones; e.g.
    "1-2" or "1,3"; empty: all of them), and `Layers`, the name of each network layer
    above them (`block`, `rack`, `nvlink`, or HyperPod's
    `topology.k8s.aws/network-node-layer-1..3` and `topology.k8s.aws/ultraserver-id`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    Nodes: str = Field(default="", pattern=r"^$|^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
    Layers: dict[str, str] = Field(min_length=1)

    @field_validator("Nodes", mode="before")
    @classmethod
    def _one_position(cls, value: object) -> object:
        """`Nodes: 3` (YAML's number) is position 3."""
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    def positions(self, count: int) -> list[int]:
        """The 1-based positions named, each within 1..count (ValueError otherwise)."""
        if not self.Nodes:
            return list(range(1, count + 1))
        out: list[int] = []
        for part in self.Nodes.split(","):
            low, _, high = part.partition("-")
            first, last = int(low), int(high or low)
            if not 1 <= first <= last <= count:
                raise ValueError(f"Network Nodes {part!r}: expected positions within 1-{count}")
            out += range(first, last + 1)
        return out


def levels_of(placements: Sequence[NetworkPlacement]) -> tuple[str, ...]:
    """The layers `placements` name, top first; () without any or with a mix."""
    named = {k for p in placements for k in p.Layers}
    for order in LAYER_NAMES:
        if named and named <= set(order):
            return tuple(k for k in order if k in named)
    return ()


def check_layers(resources: Sequence[tuple[str, int, Sequence[NetworkPlacement]]]) -> None:
    """For (name, node count, placements) of every compute resource: every node placed
    in the same layers, or none placed at all; each layer's domain inside one domain of
    the layer above. ValueError naming the first problem."""
    every = [p for _, _, placements in resources for p in placements]
    if not every:
        return
    levels = levels_of(every)
    if not levels:
        raise ValueError(
            f"Network Layers {sorted({k for p in every for k in p.Layers})}: use one family "
            f"of layer names, from the top down: {', '.join(LAYER_NAMES[0])}; or HyperPod's "
            f"{HYPERPOD_LAYER}1..3 and topology.k8s.aws/ultraserver-id"
        )
    parent: dict[tuple[int, str], str] = {}
    for name, count, placements in resources:
        placed = {n: p.Layers for p in placements for n in p.positions(count)}
        if len(placed) != count:
            raise ValueError(
                f"{name}: Network places {len(placed)} of its {count} nodes: with network "
                "layers in the definition, every node needs a place (Slurm's topology/tree "
                "cannot use a node outside it)"
            )
        for layers in placed.values():
            if set(layers) != set(levels):
                raise ValueError(
                    f"{name}: Network Layers {sorted(layers)}: every node needs the same "
                    f"layers: {', '.join(levels)}"
                )
            for depth, level in enumerate(levels):
                value = layers[level]
                if not _LAYER_VALUE.match(value):
                    raise ValueError(
                        f"Network Layers {level}={value!r}: expected letters, digits, "
                        "'.', '_' or '-' (at most 63, a letter or digit at each end)"
                    )
                above = layers[levels[depth - 1]] if depth else ""
                if parent.setdefault((depth, value), above) != above:
                    raise ValueError(
                        f"Network Layers {level}={value}: it sits in both "
                        f"{levels[depth - 1]}={parent[(depth, value)]} and {above}: "
                        "a domain lies inside one domain of the layer above"
                    )


__all__ = ["HYPERPOD_LAYER", "LAYER_NAMES", "NetworkPlacement", "check_layers", "levels_of"]
