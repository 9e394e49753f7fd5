"""The GPU inventory through the NVML seam, with values recorded from real drivers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from podium.config.cluster import GpuInventory
from podium.errors import ConfigError
from podium.node.inventory import gpu_type_name, resolve_inventory


@dataclass
class Memory:
    total: int


class RecordedNvml:
    """Answers as NVML did on an 8 x H100 80GB node (names and sizes as reported)."""

    def __init__(self, names: list[str], fail_init: bool = False) -> None:
        self.names = names
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        return len(self.names)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return index

    def nvmlDeviceGetName(self, handle: Any) -> bytes:
        return self.names[handle].encode()

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Memory:
        return Memory(total=85520809984)

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        return f"GPU-00000000-0000-0000-0000-00000000000{handle}"


def test_nvml_inventory() -> None:
    nvml = RecordedNvml(["NVIDIA H100 80GB HBM3"] * 8)
    gpus = resolve_inventory(GpuInventory(source="nvml"), nvml)
    assert [g.index for g in gpus] == list(range(8))
    assert {g.type for g in gpus} == {"h100"} and gpus[0].memory_mb == 81559
    assert nvml.shut


def test_declared_and_auto_fallback() -> None:
    declared = GpuInventory(source="declared", count=4, type="a100", memory_mb=40960)
    assert [g.type for g in resolve_inventory(declared, RecordedNvml(["x"]))] == ["a100"] * 4
    auto = GpuInventory(source="auto", count=2, type="h200")
    assert len(resolve_inventory(auto, RecordedNvml([], fail_init=True))) == 2
    with pytest.raises(ConfigError, match="NVML cannot be read"):
        resolve_inventory(GpuInventory(source="nvml"), RecordedNvml([], fail_init=True))


@pytest.mark.parametrize(
    "name,short",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA GeForce RTX 4090", "geforce"),
    ],
)
def test_type_names(name: str, short: str) -> None:
    assert gpu_type_name(name) == short


@pytest.mark.gpu
def test_real_nvml_when_present() -> None:
    from podium.node.inventory import read_nvml

    gpus = read_nvml()
    if not gpus:
        pytest.skip("no NVIDIA GPU / NVML on this machine")
    assert all(g.memory_mb > 0 and g.uuid.startswith("GPU-") for g in gpus)


class TopologyNvml(RecordedNvml):
    """8 GPUs: 0-3 behind one PCIe switch, 4-7 behind another (levels as NVML reports)."""

    def nvmlDeviceGetTopologyCommonAncestor(self, a: Any, b: Any) -> int:
        return 10 if (a < 4) == (b < 4) else 50


def test_topology_groups_from_nvml_and_declared() -> None:
    from podium.node.inventory import gpu_groups, read_nvml_topology

    nvml = TopologyNvml(["NVIDIA H100 80GB HBM3"] * 8)
    assert read_nvml_topology(nvml) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    gpus = resolve_inventory(GpuInventory(source="nvml"), nvml)
    assert gpu_groups(GpuInventory(source="nvml"), gpus, nvml) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    declared = GpuInventory(source="declared", count=4, topology=[[0, 1], [2, 3]])
    assert gpu_groups(declared, resolve_inventory(declared)) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="outside"):
        GpuInventory(source="declared", count=2, topology=[[0, 5]])
