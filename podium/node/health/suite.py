"""The checks a node runs, built from its cluster config."""

from __future__ import annotations

from pathlib import Path

from podium.node.health.base import Check
from podium.node.health.burnin import BurnInCheck
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
        pci = {g.bus_id: g.index for g in gpus}
        checks.append(
            XidCheck(
                Path(h.kernel_log), pci, state=home / "xid-offset.json", start_at_end=xid_from_end
            )
        )
    checks.append(DcgmDiagCheck(level=dcgm_level or h.dcgm_level))
    burn = [g.index for g in gpus] if burn_in_gpus is None else burn_in_gpus
    checks.append(BurnInCheck(burn, h.burn_in_seconds))
    if h.nccl_output:
        busbw = {t: v.nccl_busbw_gbps for t, v in h.thresholds.items() if v.nccl_busbw_gbps}
        checks.append(NcclBandwidthCheck(Path(h.nccl_output), gpu_type, busbw))
    return checks
