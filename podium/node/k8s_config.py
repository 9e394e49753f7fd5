"""The NVIDIA Kubernetes device plugin's config and the GPU Operator's mig-parted config
from Podium's `node.gpus` (text only; nothing here touches a cluster or a GPU).

The device plugin shares every GPU of a node alike (`sharing.timeSlicing` or
`sharing.mps`, one replica count per resource), while Podium sets a mode per GPU.
So the GPUs that are not split by MIG must all be in one mode (whole, shards, or MPS)
for the node to be rendered; MIG GPUs are given by the mixed strategy
(`nvidia.com/mig-1g.10gb`, ...) with the layouts in a mig-parted config that the GPU
Operator applies through the node label `nvidia.com/mig.config`.

Podium's shards become time-slicing replicas (both give no isolation); its MPS units
become MPS replicas (a pod takes one replica: 1/units of the GPU, where a Podium job
asks for several units at once). The plugin does not share by MPS on a node with MIG
enabled, so that combination is refused.
"""

from __future__ import annotations

from podium.config.cluster import GpuInventory
from podium.errors import ConfigError
from podium.node.mig_config import CONFIG_NAME, mig_parted

RESOURCE = "nvidia.com/gpu"


def node_sharing(gpus: GpuInventory) -> tuple[str, int]:
    """("none"|"shard"|"mps", replicas) shared by every GPU not split by MIG; raises
    ConfigError (one line) when they differ, as the device plugin cannot say that."""
    rest = [i for i in range(gpus.count) if i not in gpus.mig]
    modes = {
        (gpus.sharing[i].kind, gpus.sharing[i].units) if i in gpus.sharing else ("none", 1)
        for i in rest
    }
    if len(modes) > 1:
        listed = ", ".join(
            f"GPU {i} {gpus.sharing[i].kind}" if i in gpus.sharing else f"GPU {i} whole"
            for i in rest
        )
        raise ConfigError(
            "the NVIDIA device plugin shares every GPU of a node alike, but this node's "
            f"differ ({listed}): give every GPU outside MIG the same sharing to render it"
        )
    return next(iter(modes)) if modes else ("none", 1)


def device_plugin(gpus: GpuInventory) -> str:
    """The device plugin's config file (version v1) for a node with these GPUs."""
    mode, replicas = node_sharing(gpus)
    if mode == "mps" and gpus.mig:
        split = ", ".join(str(i) for i in sorted(gpus.mig))
        raise ConfigError(
            "the NVIDIA device plugin cannot share by MPS on a node with MIG enabled "
            f"(GPU {split} split): use shards (time-slicing) there, or MPS on a node "
            "without MIG"
        )
    lines = [
        "version: v1",
        "flags:",
        f"  migStrategy: {'mixed' if gpus.mig else 'none'}",
        "  failOnInitError: true",
    ]
    if mode != "none":
        key = "timeSlicing" if mode == "shard" else "mps"
        lines += [
            "sharing:",
            f"  {key}:",
            "    renameByDefault: false",
        ]
        if key == "timeSlicing":
            lines.append("    failRequestsGreaterThanOne: true")
        if key == "mps":  # the plugin gives each replica an equal part of the GPU
            lines.append(
                f"    # each pod takes one replica: 1/{replicas} of a GPU's SMs and memory"
            )
        lines += [
            "    resources:",
            f"      - name: {RESOURCE}",
            f"        replicas: {replicas}",
        ]
    return "\n".join(lines) + "\n"


def gpu_operator_mig(gpus: GpuInventory) -> str:
    """The mig-parted config for the GPU Operator (label the node
    nvidia.com/mig.config=<name>); "" when no GPU is split."""
    if not gpus.mig:
        return ""
    layouts = {i: tuple(gpus.mig.get(i, ())) for i in range(gpus.count)}
    return mig_parted(layouts, CONFIG_NAME)


def node_resources(gpus: GpuInventory) -> dict[str, int]:
    """The extended resources a node with these GPUs advertises through the device
    plugin's config above: `nvidia.com/gpu` for the GPUs outside MIG (times the
    replicas when shared) and `nvidia.com/mig-<profile>` per MIG slice (mixed strategy)."""
    mode, replicas = node_sharing(gpus)
    whole = gpus.count - len(gpus.mig)
    found: dict[str, int] = {RESOURCE: whole * (replicas if mode != "none" else 1)}
    for slices in gpus.mig.values():
        for profile in slices:
            name = f"nvidia.com/mig-{profile}"
            found[name] = found.get(name, 0) + 1
    return found


__all__ = ["RESOURCE", "device_plugin", "gpu_operator_mig", "node_resources", "node_sharing"]
