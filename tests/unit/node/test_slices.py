"""MIG slices as schedulable GPUs: declared layouts, and NVML's MIG enumeration through
the recorded seam (podium.node.slices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.config.cluster import ClusterConfig, GpuInventory, parse_config
from podium.errors import ConfigError
from podium.node.inventory import GpuInfo, declared, read_nvml
from podium.node.nvml_replay import RecordedNvml
from podium.node.slices import (
    cap_devices,
    declared_slices,
    layouts,
    profile_of,
    read_nvml_slices,
    resolve_slices,
    schedulable,
)
from podium.server.local_node import LocalNode

MIG_H100 = Path(__file__).parent / "data" / "nvml-h100-mig.json"


def inventory(**mig: list[str]) -> GpuInventory:
    return GpuInventory(
        source="declared",
        count=2,
        type="h100",
        memory_mb=81920,
        devices=["/dev/nvidia0", "/dev/nvidia1"],
        mig={int(k[3:]): v for k, v in mig.items()},
    )


def test_declared_slices_follow_the_gpus_and_keep_the_parent() -> None:
    inv = inventory(gpu0=["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])
    gpus = declared(inv)
    slices = declared_slices(inv, gpus)
    assert [(s.index, s.type, s.parent, s.start) for s in slices] == [
        (2, "2g.20gb", 0, 0),  # numbered by GPU and start: 2 + 8 * GPU + start
        (4, "1g.10gb", 0, 2),
        (5, "1g.10gb", 0, 3),
        (6, "3g.40gb", 0, 4),
    ]
    assert all(s.uuid.startswith("MIG-") and s.device == "/dev/nvidia0" for s in slices)
    assert len({s.uuid for s in slices}) == 4
    assert slices[0].memory_mb == 20480 and slices[0].cuda_name == slices[0].uuid
    assert slices[0].bus_id == gpus[0].bus_id  # an Xid on the GPU names the slices' GPU
    assert declared_slices(inv, gpus) == slices  # the same UUIDs every start
    devices = schedulable(gpus, slices)
    assert [d.index for d in devices] == [1, 2, 4, 5, 6]  # GPU 0 is not given whole
    assert devices[0].cuda_name == "1" and devices[0].physical == 1
    assert layouts(slices) == {0: ["2g.20gb", "1g.10gb", "1g.10gb", "3g.40gb"]}
    assert resolve_slices(inv, gpus) == slices


@pytest.mark.parametrize(
    ("mig", "message"),
    [
        (
            "{0: [4g.40gb, 3g.40gb, 1g.10gb]}",
            "3g.40gb + 1g.10gb needs 8 compute slices; a GPU has 7",
        ),
        (
            "{0: [3g.40gb, 3g.40gb, 1g.10gb]}",
            "does not fit its 8 memory slices (3g.40gb takes 4 memory slice(s) at start 0/4",
        ),
        ("{0: [1g.5gb]}", "'1g.5gb' is not a MIG profile of the H100 80GB"),
        ("{5: [1g.10gb]}", "mig: GPU 5 is not one of 0..1"),
        ("{0: []}", "lists no slices"),
    ],
)
def test_a_bad_layout_is_one_line_naming_the_rule(mig: str, message: str) -> None:
    text = (
        "node: {gpus: {source: declared, count: 2, type: h100, memory_mb: 81920, "
        f"mig: {mig}}}}}\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, "cluster.yaml")
    assert str(err.value).startswith("cluster.yaml: node.gpus: mig: GPU")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_mig_on_a_gpu_without_mig_is_refused() -> None:
    with pytest.raises(ConfigError, match="GPU type 'l4' has no MIG profiles"):
        parse_config(
            "node: {gpus: {source: declared, count: 1, type: l4, mig: {0: [1g.10gb]}}}\n",
            "cluster.yaml",
        )


def test_nvml_lists_the_slices_of_a_gpu_in_mig_mode() -> None:
    nvml = RecordedNvml.from_file(MIG_H100)
    gpus = read_nvml(nvml)
    assert gpus is not None and len(gpus) == 2
    slices = read_nvml_slices(gpus, nvml)
    assert [(s.index, s.type, s.parent, s.start) for s in slices] == [
        (2, "3g.40gb", 0, 4),
        (3, "2g.20gb", 0, 0),
        (4, "1g.10gb", 0, 2),
        (5, "1g.10gb", 0, None),  # its placement could not be read: all by NVML's slot
    ]
    assert slices[0].uuid == "MIG-2a1b7c54-0b8e-5f0e-9d7c-6b2e6a0c9f11"
    assert slices[0].memory_mb == 40192 and slices[0].pci == gpus[0].pci
    assert [d.index for d in schedulable(gpus, slices)] == [1, 2, 3, 4, 5]
    assert resolve_slices(GpuInventory(), gpus, nvml) == slices


def test_capability_devices_come_from_the_drivers_tree(tmp_path: Path) -> None:
    gi = tmp_path / "gpu0" / "mig" / "gi9"
    (gi / "ci0").mkdir(parents=True)
    (gi / "access").write_text("DeviceFileMinor: 84\nDeviceFileMode: 292\n")
    (gi / "ci0" / "access").write_text("DeviceFileMinor: 85\nDeviceFileMode: 292\n")
    assert cap_devices("/dev/nvidia0", 9, 0, tmp_path) == (
        "/dev/nvidia-caps/nvidia-cap84",
        "/dev/nvidia-caps/nvidia-cap85",
    )
    assert cap_devices("/dev/nvidia0", 10, 0, tmp_path) == ()  # not there: unknown
    assert cap_devices("/dev/nvidia0", None, None, tmp_path) == ()


def test_profile_names_from_nvml() -> None:
    assert profile_of("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "1g.10gb"
    assert profile_of("NVIDIA A100-SXM4-40GB MIG 3g.20gb") == "3g.20gb"
    assert profile_of("NVIDIA H100 80GB HBM3") is None


def test_a_whole_gpu_is_its_own_parent() -> None:
    g = GpuInfo(3, "h100", 81920, "GPU-x")
    assert (g.physical, g.cuda_name) == (3, "3")


def test_parts_are_charged_by_their_fraction_of_the_gpu() -> None:
    inv = GpuInventory(
        source="declared",
        count=3,
        type="h100",
        memory_mb=81920,
        mig={0: ["3g.40gb", "1g.10gb"]},
        sharing={1: {"shards": 4}, 2: {"mps": 100}},  # type: ignore[dict-item]
    )
    gpus = declared(inv)
    parts = resolve_slices(inv, gpus)
    assert [(p.index, p.type, p.parent) for p in parts[:3]] == [
        (3, "3g.40gb", 0),  # at 0, the 1g.10gb at 4
        (7, "1g.10gb", 0),
        (27, "shard", 1),  # after the slices' room: 3 GPUs * 9
    ]
    assert [round(p.fraction, 3) for p in parts[:6]] == [0.429, 0.143, 0.25, 0.25, 0.25, 0.25]
    assert len(parts) == 2 + 4 + 100 and parts[-1].fraction == 0.01
    assert {p.cuda_name for p in parts[2:6]} == {"1"}  # a shard: its GPU's index
    assert {p.cuda_name for p in parts[6:]} == {"declared-2"}  # MPS: its GPU's UUID
    assert schedulable(gpus, parts) == parts  # no GPU is given whole
    config = ClusterConfig.model_validate({"node": {"name": "n0", "cpus": 1, "memory_mb": 1000}})
    node = LocalNode.from_config(config, gpus, parts)
    assert node.gpu_units([3, 27]) == pytest.approx(3 / 7 + 1 / 4)
    assert node.gpu_units(list(range(31, 81))) == pytest.approx(0.5)  # mps:50 (units 31-130)
    assert node.visible(list(range(31, 81))) == [2]
    assert node.visible([3, 27, 28, 31]) == [3, 1, 2]
    whole = LocalNode.from_config(config, declared(GpuInventory(source="declared", count=2)))
    assert whole.gpu_units([0, 1]) is None  # whole GPUs: charged by count


def test_a_gpu_is_in_one_mode_at_a_time() -> None:
    with pytest.raises(ConfigError, match="GPU 0 is in both mig and sharing"):
        parse_config(
            "node: {gpus: {source: declared, count: 1, type: h100, memory_mb: 81920, "
            "mig: {0: [7g.80gb]}, sharing: {0: {mps: 100}}}}\n",
            "cluster.yaml",
        )
    with pytest.raises(ConfigError, match="give one of shards: N or mps: N"):
        parse_config(
            "node: {gpus: {source: declared, count: 1, sharing: {0: {mps: 50, shards: 2}}}}\n",
            "cluster.yaml",
        )
    with pytest.raises(ConfigError, match="less than or equal to 100"):
        parse_config(
            "node: {gpus: {source: declared, count: 1, sharing: {0: {mps: 150}}}}\n",
            "cluster.yaml",
        )
