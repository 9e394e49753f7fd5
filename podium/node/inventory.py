"""The node's GPUs, read from NVML or taken from the cluster config's declaration.

NVML is reached through `NvmlSeam`, so tests give recorded values without a GPU. A
declared inventory is the only stand-in Podium allows: everything above it (the
scheduler, binding, CUDA_VISIBLE_DEVICES) is the same code path as with real GPUs.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from podium.config.cluster import GpuInventory
from podium.errors import ConfigError
from podium.node.nvml_replay import load_nvml


@dataclass(frozen=True)
class GpuInfo:
    """One GPU: index (NVML / PCI bus order), type, memory and UUID; or one part of a
    GPU (`parent` set, its index after the GPUs', podium.node.slices): a MIG slice
    (type its profile, 1g.10gb; UUID MIG-...; `caps` the capability device files that
    open it, /dev/nvidia-caps/nvidia-capN), a shard or an MPS unit (type "shard" or
    "mps"); device and bus id are the GPU's."""

    index: int
    type: str
    memory_mb: int
    uuid: str = ""
    pci: str = ""  # PCI bus id as the kernel log names it ("" when declared)
    device: str = ""  # its device file (/dev/nvidia0), for device confinement; "" if none
    parent: int | None = None  # MIG slice, shard, MPS unit: the GPU it is part of
    start: int | None = None  # MIG slice: its first memory slice (None: unknown)
    caps: tuple[str, ...] = ()  # MIG slice: its GPU and compute instance access devices
    kind: str = ""  # "": a whole GPU; "mig", "shard" or "mps" (podium.node.slices)
    fraction: float = 1.0  # the part of its GPU fair share charges: 3g of 7, 1 of 4 shards

    @property
    def bus_id(self) -> str:
        """The PCI bus id Xid lines name this GPU by (a declared one's: declared_bus_id)."""
        return self.pci or declared_bus_id(self.index if self.parent is None else self.parent)

    @property
    def physical(self) -> int:
        """The index of the GPU this device is (itself) or is a slice of."""
        return self.index if self.parent is None else self.parent

    @property
    def cuda_name(self) -> str:
        """How CUDA_VISIBLE_DEVICES names it: a MIG slice by its UUID, an MPS unit by its
        GPU's UUID (an MPS server renumbers devices), a shard by its GPU's index, a GPU
        by its own."""
        return self.uuid if self.kind in ("mig", "mps") else str(self.physical)


DECLARED_DOMAIN = 0x8000  # declared GPUs' PCI domains: above those real GPUs sit in


def declared_domain(place: str) -> int:
    """The PCI domain of the GPUs a cluster declares, from `place` (its state directory):
    two clusters on one machine (parallel test daemons) never share a bus id, and none
    is in domain 0000, where real GPUs are, so an Xid of one never fences another's."""
    return DECLARED_DOMAIN | (zlib.crc32(place.encode()) & 0x7FFF)


def declared_bus_id(index: int, place: str = "") -> str:
    """The PCI bus id declared GPU `index` of the cluster at `place` stands at, for Xid
    lines: DDDD:<index>:00 (see declared_domain)."""
    return f"{declared_domain(place):04x}:{index:02x}:00"


class NvmlSeam(Protocol):
    """The few NVML calls Podium makes (pynvml's names)."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any: ...
    def nvmlDeviceGetName(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any: ...
    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes: ...
    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int: ...
    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int: ...


def gpu_type_name(product: str) -> str:
    """A short GRES type from an NVML product name ("NVIDIA H100 80GB HBM3" -> "h100")."""
    words = [w for w in re.split(r"[\s_-]+", product.lower()) if w not in ("nvidia", "tesla")]
    return words[0] if words else "gpu"


def nvml_text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextmanager
def nvml_session(nvml: NvmlSeam | None) -> Iterator[NvmlSeam | None]:
    """NVML initialised for the block, or None when it cannot be read here."""
    if nvml is None:
        try:
            nvml = load_nvml()
        except (ImportError, OSError, ValueError):
            yield None
            return
    try:
        nvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        yield None
        return
    try:
        yield nvml
    finally:
        nvml.nvmlShutdown()


def read_nvml(nvml: NvmlSeam | None = None) -> list[GpuInfo] | None:
    """The GPUs NVML reports, or None when NVML is not available on this machine."""
    with nvml_session(nvml) as session:
        if session is None:
            return None
        gpus = []
        for index in range(session.nvmlDeviceGetCount()):
            handle = session.nvmlDeviceGetHandleByIndex(index)
            memory = session.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                GpuInfo(
                    index=index,
                    type=gpu_type_name(nvml_text(session.nvmlDeviceGetName(handle))),
                    memory_mb=int(memory.total // (1024 * 1024)),
                    uuid=nvml_text(session.nvmlDeviceGetUUID(handle)),
                    pci=_pci(session, handle),
                    device=_device_file(session, handle, index),
                )
            )
        return gpus


def _pci(session: Any, handle: Any) -> str:
    try:
        return nvml_text(session.nvmlDeviceGetPciInfo(handle).busId)
    except Exception:  # an older seam or driver: Xids are then matched by index order
        return ""


def _device_file(session: Any, handle: Any, index: int) -> str:
    """/dev/nvidiaN, N the GPU's minor number (the index where the driver cannot say).
    A recording (`nvml_replay`) may name the file itself."""
    recorded = getattr(session, "device_file", None)
    if recorded is not None:
        return str(recorded(handle))
    try:
        return f"/dev/nvidia{int(session.nvmlDeviceGetMinorNumber(handle))}"
    except Exception:
        return f"/dev/nvidia{index}"


# NVML topology levels (nvmlGpuTopologyLevel_t): 0 same board, 10 one PCIe switch,
# 20 several switches, 30 host bridge, 40 NUMA node, 50 across sockets.
CLOSE_LEVEL = 10


def read_nvml_topology(nvml: NvmlSeam | None = None) -> list[list[int]] | None:
    """Groups of GPU indices whose common ancestor is at most one PCIe switch (or the
    same board), from NVML; None when NVML cannot be read."""
    with nvml_session(nvml) as session:
        if session is None:
            return None
        count = session.nvmlDeviceGetCount()
        handles = [session.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        parent = list(range(count))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        try:
            for a in range(count):
                for b in range(a + 1, count):
                    level = session.nvmlDeviceGetTopologyCommonAncestor(handles[a], handles[b])
                    if level <= CLOSE_LEVEL:
                        parent[root(b)] = root(a)
        except Exception:  # the driver cannot tell: schedule without a topology
            return []
        groups: dict[int, list[int]] = {}
        for i in range(count):
            groups.setdefault(root(i), []).append(i)
        return [g for g in groups.values() if len(g) > 1]


def from_nvml(gpus: list[GpuInfo]) -> bool:
    """Whether `gpus` are real, read from NVML (not declared in the config, not none)."""
    return bool(gpus) and not gpus[0].uuid.startswith("declared-")


def gpu_groups(
    inv: GpuInventory, gpus: list[GpuInfo], nvml: NvmlSeam | None = None
) -> list[list[int]]:
    """The topology groups to schedule with: declared ones, else NVML's for real GPUs."""
    if inv.topology:
        return inv.topology
    if from_nvml(gpus):
        return read_nvml_topology(nvml) or []
    return []


def declared(inv: GpuInventory, place: str = "") -> list[GpuInfo]:
    """The GPUs a config declares, at PCI bus ids of the cluster at `place` (its state
    directory: see declared_domain)."""
    return [
        GpuInfo(
            index=i,
            type=inv.type,
            memory_mb=inv.memory_mb,
            uuid=f"declared-{i}",
            pci=declared_bus_id(i, place),
            device=inv.devices[i] if inv.devices else "",
        )
        for i in range(inv.count)
    ]


def device_number(path: str) -> tuple[str, int, int] | None:
    """A device file's (type, major, minor): ("c", 195, 0) for /dev/nvidia0; None when
    the path is empty, missing or not a device."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISCHR(st.st_mode):
        return ("c", os.major(st.st_rdev), os.minor(st.st_rdev))
    if stat.S_ISBLK(st.st_mode):
        return ("b", os.major(st.st_rdev), os.minor(st.st_rdev))
    return None


def resolve_inventory(
    inv: GpuInventory, nvml: NvmlSeam | None = None, place: str = ""
) -> list[GpuInfo]:
    """The node's GPUs per its config: NVML, declared, or NVML falling back to declared
    (at the bus ids of the cluster whose state directory is `place`).

    Raises ConfigError when source is "nvml" and NVML cannot be read.
    """
    if inv.source == "declared":
        return declared(inv, place)
    found = read_nvml(nvml)
    if found is None:
        if inv.source == "nvml":
            raise ConfigError(
                "node.gpus.source is nvml but NVML cannot be read on this machine "
                "(declare the GPUs with source: declared, count, type)"
            )
        return declared(inv, place)
    return found


def node_cpu_ids(declared: int) -> tuple[int, ...] | None:
    """The machine's CPU ids that back a node of `declared` CPUs (the first ones this
    process may run on), or None when the node declares more CPUs than there are: then
    jobs cannot be given CPUs by id, only counted."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except OSError:
        available = list(range(os.cpu_count() or 1))
    if declared > len(available):
        return None
    return tuple(available[:declared])
