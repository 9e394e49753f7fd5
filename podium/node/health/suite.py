"""The checks a node runs, built from its cluster config."""

from __future__ import annotations

from pathlib import Path

from podium.node.health.base import Check
from podium.node.health.dcgm import DcgmDiagCheck
from podium.node.health.gpu import GpuChecks, GpuProbe, GpuThresholds, NvmlProbe
from podium.node.health.nccl import NcclBandwidthCheck
from podium.node.health.system import DiskSpaceCheck, MountCheck
from podium.node.health.xid import XidCheck
from podium.node.inventory import GpuInfo
from podium.spec.cluster import ClusterConfig


def nvml_probe() -> GpuProbe | None:
    """An NVML probe, or None on machines without a working driver."""
    try:
        return NvmlProbe()
    except Exception:
        return None


def node_checks(
    config: ClusterConfig, home: Path, gpus: list[GpuInfo], probe: GpuProbe | None
) -> list[Check]:
    """Quick checks (GPU state, Xid, disk, mounts) and deep ones (DCGM, NCCL bandwidth)."""
    h = config.health
    gpu_type = config.node.gpus.type.lower()
    limits = h.thresholds.get(gpu_type)
    thresholds = (
        GpuThresholds(
            max_retired_pages=limits.max_retired_pages,
            max_temperature_c=limits.max_temperature_c,
            max_leftover_mb=limits.max_leftover_mb,
        )
        if limits
        else GpuThresholds()
    )
    declared = bool(gpus) and gpus[0].uuid.startswith("declared-")
    checks: list[Check] = [
        GpuChecks(None if declared else probe, expected=len(gpus), thresholds=thresholds),
        DiskSpaceCheck(
            [Path(p) for p in h.disk_paths] or [Path("/"), home], h.max_disk_used_percent
        ),
    ]
    if h.required_mounts:
        checks.append(MountCheck([Path(p) for p in h.required_mounts]))
    if h.kernel_log:
        # Declared GPUs have no PCI address: name them 0000:<index>:00 for injected faults.
        pci = {f"0000:{g.index:02x}:00": g.index for g in gpus}
        checks.append(XidCheck(Path(h.kernel_log), pci, state=home / "xid-offset.json"))
    checks.append(DcgmDiagCheck(level=h.dcgm_level))
    if h.nccl_output:
        busbw = {t: v.nccl_busbw_gbps for t, v in h.thresholds.items() if v.nccl_busbw_gbps}
        checks.append(NcclBandwidthCheck(Path(h.nccl_output), gpu_type, busbw))
    return checks
