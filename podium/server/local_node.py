"""The embedded cluster's one node: its GPUs, topology, CPU ids, device numbers, what
jobs may not open, and what the daemon can enforce there. Filled once at start."""

from __future__ import annotations

from dataclasses import dataclass, field

from podium.node.inventory import GpuInfo, device_number, node_cpu_ids
from podium.run.bpfdev import Device
from podium.spec.cluster import ClusterConfig


@dataclass
class LocalNode:
    """What the daemon knows of the machine it runs jobs on."""

    name: str
    cpus: int
    memory_mb: int
    gpus: list[GpuInfo]
    gpu_groups: tuple[tuple[int, ...], ...] = ()
    cpu_ids: tuple[int, ...] | None = None  # None: CPUs counted, not given by id
    gpu_devices: dict[int, Device | None] = field(default_factory=dict)
    denied_everywhere: tuple[Device, ...] = ()  # devices no job may open
    hide_gpus: bool = False  # jobs get an empty CUDA_VISIBLE_DEVICES (declared on real)
    gpu_note: str | None = None  # what users should know about the GPUs
    cgroup_v2_base: str | None = None  # set by the daemon when it prepared one
    enforcement: dict[str, str] = field(default_factory=dict)  # resource -> how (or not)

    @classmethod
    def from_config(cls, config: ClusterConfig, gpus: list[GpuInfo]) -> LocalNode:
        return cls(
            name=config.node.name,
            cpus=config.node.cpus,
            memory_mb=config.node.memory_mb,
            gpus=gpus,
            cpu_ids=node_cpu_ids(config.node.cpus),
            gpu_devices={g.index: device_number(g.device) for g in gpus},
        )

    def denied_devices(self, gpu_ids: list[int]) -> list[Device]:
        """The devices a job holding `gpu_ids` must not open: every other GPU's, and
        those no job may open (ConstrainDevices)."""
        mine = set(gpu_ids)
        others = [d for i, d in self.gpu_devices.items() if i not in mine and d is not None]
        return sorted(set(others) | set(self.denied_everywhere))
