"""The embedded cluster's one node: its GPUs, topology, CPU ids, device numbers, what
jobs may not open, and what the daemon can enforce there. Filled once at start."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from podium.config.cluster import ClusterConfig
from podium.node.inventory import GpuInfo, device_number, node_cpu_ids
from podium.node.slices import schedulable
from podium.run.bpfdev import Device
from podium.run.plan import Grant


@dataclass
class LocalNode:
    """What the daemon knows of the machine it runs jobs on. `gpus` are its physical
    GPUs (health checks, Xids); `devices` what jobs are given: the GPUs not in MIG
    mode and the MIG slices (podium.node.slices), by index."""

    name: str
    cpus: int
    memory_mb: int
    gpus: list[GpuInfo]
    gpu_groups: tuple[tuple[int, ...], ...] = ()
    cpu_ids: tuple[int, ...] | None = None  # None: CPUs counted, not given by id
    devices: list[GpuInfo] = field(default_factory=list)
    gpu_devices: dict[int, tuple[Device, ...]] = field(default_factory=dict)  # device -> files
    denied_everywhere: tuple[Device, ...] = ()  # devices no job may open
    hide_gpus: bool = False  # jobs get an empty CUDA_VISIBLE_DEVICES (declared on real)
    gpu_note: str | None = None  # what users should know about the GPUs
    cgroup_v2_base: str | None = None  # set by the daemon when it prepared one
    enforcement: dict[str, str] = field(default_factory=dict)  # resource -> how (or not)

    parts: dict[int, float] = field(default_factory=dict, init=False)  # part -> fraction

    def __post_init__(self) -> None:
        if not self.devices:
            self.devices = list(self.gpus)
        self.parts = {d.index: d.fraction for d in self.devices if d.parent is not None}

    @classmethod
    def from_config(
        cls, config: ClusterConfig, gpus: list[GpuInfo], slices: list[GpuInfo] | None = None
    ) -> LocalNode:
        devices = schedulable(gpus, slices or [])
        return cls(
            name=config.node.name,
            cpus=config.node.cpus,
            memory_mb=config.node.memory_mb,
            gpus=gpus,
            cpu_ids=node_cpu_ids(config.node.cpus),
            devices=devices,
            gpu_devices={d.index: _device_numbers(d) for d in devices},
        )

    def resplit(self, gpu: int, slices: list[GpuInfo]) -> None:
        """Give jobs GPU `gpu` as its new MIG `slices` ([]: whole), every other device
        keeping its number (`podium mig apply`, once no job holds any part of it)."""
        others = [d for d in self.devices if d.physical != gpu]
        mine = slices or [g for g in self.gpus if g.index == gpu]
        whole = sorted((d for d in others + mine if d.parent is None), key=lambda d: d.index)
        parts = sorted((d for d in others + mine if d.parent is not None), key=lambda d: d.index)
        self.devices = whole + parts
        self.parts = {d.index: d.fraction for d in self.devices if d.parent is not None}
        self.gpu_devices = {
            i: files for i, files in self.gpu_devices.items() if i in {d.index for d in others}
        }
        self.gpu_devices.update({d.index: _device_numbers(d) for d in mine})

    def parent_of(self, index: int) -> int:
        """The physical GPU a device index is (a GPU) or is part of (a MIG slice)."""
        for d in self.devices:
            if d.index == index:
                return d.physical
        return index

    def devices_for(self, gpu_type: str | None) -> list[int]:
        """The indices of the devices a request of `gpu_type` may get: a MIG profile's
        slices, else the whole GPUs (of that type)."""
        slices = [d.index for d in self.devices if d.parent is not None and d.type == gpu_type]
        if slices:
            return slices
        return [d.index for d in self.devices if d.parent is None and gpu_type in (None, d.type)]

    def gpu_units(self, gpu_ids: list[int]) -> float | None:
        """The GPUs fair share charges for holding `gpu_ids` when some are parts of a
        GPU (a MIG slice by its compute, a shard or MPS unit by its count); None when
        all are whole (then their number is charged)."""
        parts = self.parts
        if not parts or not any(i in parts for i in gpu_ids):
            return None
        return sum(parts.get(i, 1.0) for i in gpu_ids)

    def visible(self, gpu_ids: list[int]) -> list[int]:
        """The GPU indices a job holding `gpu_ids` sees (SLURM_JOB_GPUS): a shard or
        MPS unit as its GPU, once; a GPU or MIG slice as itself."""
        kinds = {d.index: d for d in self.devices if d.kind in ("shard", "mps")}
        out: list[int] = []
        for i in gpu_ids:
            seen = kinds[i].physical if i in kinds else i
            if seen not in out:
                out.append(seen)
        return out

    def grant_of(
        self, units: Sequence[int], cpus: int, mem_mb: int, cpu_ids: Sequence[int] = ()
    ) -> Grant:
        """The Grant of a start holding the devices `units` (as the scheduler
        picked them), `cpus` CPUs (these `cpu_ids` where CPUs are given by id) and
        `mem_mb`: the GPUs the job sees, each with its name for CUDA_VISIBLE_DEVICES
        (a MIG slice by its UUID; an MPS share's GPU by the UUID its MPS server was
        started for, since the server renumbers its clients' devices)."""
        mine = set(units)
        names: dict[int, str] = {}
        for d in self.devices:
            if d.index in mine and d.kind == "mig":
                names[d.index] = d.uuid
            elif d.index in mine and d.kind == "mps":
                names[d.physical] = d.uuid
        seen = tuple(self.visible(list(units)))
        return Grant(
            units=tuple(units),
            gpu_ids=seen,
            cuda_names=tuple(names.get(g, str(g)) for g in seen),
            cpus=cpus,
            mem_mb=mem_mb,
            cpu_ids=tuple(cpu_ids),
        )

    def denied_devices(self, gpu_ids: list[int]) -> list[Device]:
        """The devices a job holding `gpu_ids` must not open: every other GPU's (a
        slice's: its MIG capability files; the GPU's own file is shared with the
        other slices of the GPU), and those no job may open (ConstrainDevices)."""
        mine = set(gpu_ids)
        allowed: set[Device] = set()
        others: set[Device] = set()
        for index, files in self.gpu_devices.items():
            (allowed if index in mine else others).update(files)
        return sorted((others - allowed) | set(self.denied_everywhere))


def _device_numbers(device: GpuInfo) -> tuple[Device, ...]:
    """The device numbers of a GPU's file, or a slice's GPU file and capability files."""
    files = (device.device, *device.caps)
    return tuple(n for n in (device_number(f) for f in files) if n is not None)
