"""Config sections for what runs jobs: the GPU inventory, the node, partitions."""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import Field, field_validator, model_validator

from podium.api.mig import MODELS, MigLayoutError, model_for, place
from podium.api.timefmt import parse_duration
from podium.config.common import Closed


def _detected_memory_mb() -> int:
    import psutil

    return int(psutil.virtual_memory().total // (1024 * 1024))


class GpuSharing(Closed):
    """How one whole GPU is shared (one mode per GPU): `shards` (Slurm's shard GRES:
    that many jobs at once, no fencing) or `mps` (Slurm's mps GRES: that many units,
    usually 100 for percent, under an MPS server with per-job thread and memory caps)."""

    shards: int | None = Field(default=None, ge=1, le=128)
    mps: int | None = Field(default=None, ge=1, le=100)

    @model_validator(mode="after")
    def _one_mode(self) -> GpuSharing:
        if (self.shards is None) == (self.mps is None):
            raise ValueError("give one of shards: N or mps: N (a GPU is in one mode at a time)")
        return self

    @property
    def kind(self) -> str:
        return "shard" if self.shards is not None else "mps"

    @property
    def units(self) -> int:
        return self.shards if self.shards is not None else (self.mps or 0)


class GpuInventory(Closed):
    """Where the node's GPUs come from.

    source "nvml" reads them from the driver; "declared" trusts count/type/memory
    (for machines without a GPU: everything above the inventory is the real path);
    "auto" uses NVML when it answers and the declaration otherwise.
    """

    source: Literal["auto", "nvml", "declared"] = "auto"
    count: int = Field(default=0, ge=0, le=64)
    type: str = Field(default="gpu", pattern=r"^[A-Za-z0-9_.-]+$")
    memory_mb: int = Field(default=0, ge=0)
    devices: list[str] = Field(
        default_factory=list,
        description="declared GPUs: each one's device file (one per GPU), so that a job "
        "cannot open a GPU it was not given; NVML GPUs use /dev/nvidiaN",
    )
    driver_files: list[str] = Field(
        default_factory=list,
        description="declared GPUs: the NVIDIA driver's libraries and tools a container "
        "with NVIDIA_VISIBLE_DEVICES gets (real GPUs: what ldconfig -p and PATH find)",
    )
    topology: list[list[int]] = Field(
        default_factory=list,
        description="groups of GPU indices behind one NVLink domain or PCIe switch "
        "(declared GPUs; NVML-detected GPUs are grouped from the driver's topology)",
    )
    mig: dict[int, list[str]] = Field(
        default_factory=dict,
        description="declared GPUs in MIG mode: each one's slices by profile name, as an "
        "admin partitioned it (e.g. {0: [3g.40gb, 2g.20gb, 1g.10gb, 1g.10gb]}); checked "
        "against the GPU model's placement rules. NVML GPUs: read from the driver",
    )

    sharing: dict[int, GpuSharing] = Field(
        default_factory=dict,
        description="GPUs shared rather than given whole: {index: {shards: N}} or "
        "{index: {mps: 100}} (a GPU in MIG mode cannot also be shared this way)",
    )

    @model_validator(mode="after")
    def _topology_in_range(self) -> GpuInventory:
        flat = [i for group in self.topology for i in group]
        if len(flat) != len(set(flat)):
            raise ValueError("a GPU may be in only one topology group")
        if self.source == "declared" and any(not 0 <= i < self.count for i in flat):
            raise ValueError(f"topology names GPUs outside 0..{self.count - 1}")
        if self.devices and len(self.devices) != self.count:
            raise ValueError(
                f"devices lists {len(self.devices)} files for {self.count} GPUs: give one each"
            )
        self._check_mig()
        for index in self.sharing:
            if self.source == "declared" and not 0 <= index < self.count:
                raise ValueError(f"sharing: GPU {index} is not one of 0..{self.count - 1}")
            if index in self.mig:
                mode = self.sharing[index].kind
                raise ValueError(
                    f"GPU {index} is in both mig and sharing ({mode}): a GPU is in one mode "
                    "at a time (whole, MIG slices, MPS or shards)"
                )
        return self

    def _check_mig(self) -> None:
        """Each MIG layout names a GPU of the node and fits the model's rules."""
        if not self.mig:
            return
        model = model_for(self.type, self.memory_mb or None)
        if model is None:
            raise ValueError(
                f"mig: GPU type {self.type!r} has no MIG profiles "
                f"(MIG GPUs: {', '.join(sorted(MODELS))}; set type and memory_mb)"
            )
        for index, layout in self.mig.items():
            if self.source == "declared" and not 0 <= index < self.count:
                raise ValueError(f"mig: GPU {index} is not one of 0..{self.count - 1}")
            if not layout:
                raise ValueError(f"mig: GPU {index} lists no slices (drop the key for a whole GPU)")
            try:
                place(model, layout)
            except MigLayoutError as exc:
                raise ValueError(f"mig: GPU {index}: {exc}") from None


class NodeConfig(Closed):
    """The one node of the embedded cluster."""

    name: str = Field(default_factory=lambda: socket.gethostname().split(".")[0] or "node0")
    cpus: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    memory_mb: int = Field(default_factory=lambda: _detected_memory_mb(), ge=1)
    features: list[str] = Field(default_factory=list)
    gpus: GpuInventory = Field(default_factory=GpuInventory)


class Partition(Closed):
    """A queue of the cluster, with its time limits and priority tier."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    default: bool = False
    priority_tier: int = Field(default=0, ge=0)
    nodes: list[str] = Field(default_factory=list, description="its nodes; empty: all")
    default_time: str | None = None
    max_time: str = "UNLIMITED"

    @field_validator("default_time", "max_time")
    @classmethod
    def _valid_time(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @property
    def max_time_s(self) -> int | None:
        return parse_duration(self.max_time)

    @property
    def default_time_s(self) -> int | None:
        return parse_duration(self.default_time) if self.default_time else self.max_time_s
