"""The checks a node runs, built from its cluster config."""

from __future__ import annotations

from pathlib import Path

from podium.config.cluster import ClusterConfig
from podium.node.health.burnin import BurnInCheck
from podium.node.health.check_results import Check, Result, append_results, run_checks, skipped
from podium.node.health.dcgm import DcgmDiagCheck
from podium.node.health.gpu import GpuChecks, GpuProbe, GpuThresholds, NvmlProbe
from podium.node.health.links import LinkChecks, LinkExpectations, NvmlLinkProbe
from podium.node.health.nccl import NcclBandwidthCheck
from podium.node.health.nics import NicPortCheck
from podium.node.health.system import DiskSpaceCheck, MountCheck
from podium.node.health.xid import KmsgXidCheck, XidCheck
from podium.node.inventory import GpuInfo, from_nvml, resolve_inventory
from podium.node.mps import MpsCheck, MpsServers


def nvml_probe() -> GpuProbe | None:
    """An NVML probe, or None on machines without a working driver."""
    try:
        return NvmlProbe()
    except Exception:
        return None


def link_probe() -> NvmlLinkProbe | None:
    """An NVML probe of the GPUs' links, or None without a working driver."""
    try:
        return NvmlLinkProbe()
    except Exception:
        return None


DECLARED = "declared GPUs: NVML, DCGM and burn-in checks need real GPUs (node.gpus.source: nvml)"


class Skipped:
    """A check that does not apply on this node: it reports itself as skipped."""

    def __init__(self, name: str, why: str, deep: bool = False) -> None:
        self.name = name
        self.why = why
        self.deep = deep

    def run(self) -> list[Result]:
        return [skipped(self.name, self.why)]


def xid_check(
    config: ClusterConfig, home: Path, gpus: list[GpuInfo], from_end: bool = False
) -> XidCheck | KmsgXidCheck:
    """Xid events from the configured kernel-log file, else from the kernel itself
    (/dev/kmsg), with a cursor kept in HOME across runs and restarts."""
    pci = {g.bus_id: g.index for g in gpus}
    if config.health.kernel_log:
        return XidCheck(
            Path(config.health.kernel_log), pci, state=home / "xid-offset.json",
            start_at_end=from_end,
        )  # fmt: skip
    return KmsgXidCheck(pci, state=home / "xid-cursor.json", start_at_end=from_end)


def node_checks(
    config: ClusterConfig,
    home: Path,
    gpus: list[GpuInfo],
    probe: GpuProbe | None,
    burn_in_gpus: list[int] | None = None,
    xid_from_end: bool = False,
    dcgm_level: int | None = None,
) -> list[Check]:
    """Quick checks (GPU state, Xid, disk, mounts) and deep ones (DCGM, NCCL bandwidth,
    the PyTorch burn-in on `burn_in_gpus`, default all). `xid_from_end`: with no saved
    offset, Xid lines already in the kernel log are not reported. `dcgm_level` overrides
    the config's level for `dcgmi diag`."""
    h = config.health
    gpu_type = config.node.gpus.type.lower()
    limits = h.thresholds.get(gpu_type)
    thresholds = (
        GpuThresholds(
            max_retired_pages=limits.max_retired_pages,
            max_temperature_c=limits.max_temperature_c,
        )
        if limits
        else GpuThresholds()
    )
    declared = bool(gpus) and not from_nvml(gpus)
    gpu_check: Check = (
        Skipped("gpu", DECLARED)
        if declared
        else Skipped("gpu", "the node has no GPUs")
        if not gpus
        else GpuChecks(probe, expected=len(gpus), thresholds=thresholds)
    )
    checks: list[Check] = [
        gpu_check,
        DiskSpaceCheck(
            [Path(p) for p in h.disk_paths] or [Path("/"), home], h.max_disk_used_percent
        ),
    ]
    if h.required_mounts:
        checks.append(MountCheck([Path(p) for p in h.required_mounts]))
    checks.append(xid_check(config, home, gpus, xid_from_end))
    checks.append(NicPortCheck(Path(h.nic_sysfs), h.nic_ports))
    if declared or not gpus:
        why = DECLARED if declared else "the node has no GPUs"
        checks += [Skipped("links", why)]
        checks += [Skipped("dcgm_diag", why, deep=True), Skipped("burn_in", why, deep=True)]
    else:
        links = LinkExpectations(gpu_type, limits.nvlink_links if limits else None)
        checks.append(LinkChecks(link_probe() if probe is not None else None, links))
        checks.append(DcgmDiagCheck(level=dcgm_level or h.dcgm_level))
        burn = [g.index for g in gpus] if burn_in_gpus is None else burn_in_gpus
        checks.append(BurnInCheck(burn, h.burn_in_seconds))
    if any(m.kind == "mps" for m in config.node.gpus.sharing.values()):
        checks.append(MpsCheck(MpsServers(home)))
    if h.nccl_output:
        busbw = {t: v.nccl_busbw_gbps for t, v in h.thresholds.items() if v.nccl_busbw_gbps}
        checks.append(NcclBandwidthCheck(Path(h.nccl_output), gpu_type, busbw))
    return checks


def run_node_checks(
    config: ClusterConfig, home: Path, node: str, log: Path, deep: bool
) -> list[Result]:
    """One pass of node `node`'s checks as a per-node hook or agent runs them (its
    declared GPUs placed at `home`, Xid lines read from where the last pass stopped),
    the results appended to `log`."""
    gpus = resolve_inventory(config.node.gpus, place=str(home))
    results = run_checks(node_checks(config, home, gpus, nvml_probe(), xid_from_end=True), deep)
    append_results(log, node, results)
    return results
