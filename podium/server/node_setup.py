"""The embedded daemon's node at start: declared or NVML GPUs split as `podium mig
apply` left them, real GPUs hidden behind declared ones, and what the daemon can
enforce here (cgroups, devices)."""

from __future__ import annotations

import logging
import os

from podium.config.cluster import ClusterConfig
from podium.node.inventory import GpuInfo, device_number, from_nvml, gpu_groups, read_nvml
from podium.node.slices import layouts, resolve_slices
from podium.run.cgroups import current_layout, enforcement, prepare_v2_base
from podium.server.local_node import LocalNode

log = logging.getLogger("podium.daemon")


def hide_real_gpus(node: LocalNode, real: list[GpuInfo]) -> None:
    """Declared GPUs never name real devices that differ from them: every real NVIDIA
    device is denied to every job (the device cgroup, as root), and where that cannot
    be enforced CUDA_VISIBLE_DEVICES names none. `podium nodes` and `podium up` say so."""
    node.denied_everywhere = tuple(
        d for d in (device_number(g.device) for g in real) if d is not None
    )
    enforced = os.geteuid() == 0
    node.hide_gpus = not enforced
    kinds = sorted({g.type for g in real})
    node.gpu_note = (
        f"{len(node.gpus)} declared GPUs; jobs see none of this machine's "
        f"{len(real)} real GPU(s) ({', '.join(kinds)}): schedule those with "
        "node.gpus.source: nvml"
    )
    log.warning("%s", node.gpu_note)


def local_node(
    config: ClusterConfig, gpus: list[GpuInfo], applied: dict[int, list[str]] | None = None
) -> LocalNode:
    """The node jobs run on: its GPUs and topology, what jobs may not open, and what
    the daemon can enforce here (cgroups, devices). `applied`: the layouts `podium mig
    apply` last made, which declared GPUs (no hardware to keep them) are split in."""
    if applied and declared(config, gpus):
        keep_applied(config, applied)
    slices = resolve_slices(config.node.gpus, gpus)
    found = layouts(slices)
    declared_mig = {i: sorted(p) for i, p in config.node.gpus.mig.items()}
    if declared_mig and {i: sorted(p) for i, p in found.items()} != declared_mig:
        log.warning(
            "node.gpus.mig declares %s but the GPUs are split as %s: scheduling what is "
            "there (only podium mig apply changes a MIG layout)",
            config.node.gpus.mig,
            found,
        )
    config.node.gpus.mig = found  # what admission checks requests against
    node = LocalNode.from_config(config, gpus, slices)
    node.gpu_groups = tuple(tuple(g) for g in gpu_groups(config.node.gpus, gpus))
    if declared(config, gpus):
        real = read_nvml()
        if real:  # declared GPUs on a machine with real ones: jobs must see none of them
            hide_real_gpus(node, real)
    layout = current_layout()
    node.cgroup_v2_base = prepare_v2_base(layout)
    node.enforcement = enforcement(
        layout,  # prepare_v2_base may move the daemon, never the jobs' base
        os.geteuid() == 0,
        node.cgroup_v2_base,
        cpus_known=node.cpu_ids is not None,
        devices_known=any(node.gpu_devices.values()),
    )
    if not gpus:
        node.enforcement["devices"] = "nothing to confine: the node has no GPUs"
    log.info("limits: %s", node.enforcement)
    return node


def keep_applied(config: ClusterConfig, applied: dict[int, list[str]]) -> None:
    """Split declared GPUs as `podium mig apply` last left them (the config's layout
    until then); a GPU the config now shares or no longer has keeps the config's."""
    inv = config.node.gpus
    for gpu, layout in sorted(applied.items()):
        if gpu >= inv.count or gpu in inv.sharing:
            continue
        if layout:
            inv.mig[gpu] = list(layout)
        else:
            inv.mig.pop(gpu, None)
        log.info("GPU %s is split as podium mig apply left it: %s", gpu, layout or "whole")


def declared(config: ClusterConfig, gpus: list[GpuInfo]) -> bool:
    """Whether the node's GPUs are declared (not read from NVML)."""
    return config.node.gpus.source == "declared" or not from_nvml(gpus)


__all__ = ["declared", "hide_real_gpus", "keep_applied", "local_node"]
