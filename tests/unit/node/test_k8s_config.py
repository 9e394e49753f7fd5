"""The NVIDIA device plugin's and the GPU Operator's configs from node.gpus, pinned by
golden files (regenerate after an intended change with PODIUM_UPDATE_GOLDEN=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from podium.config.cluster import GpuInventory
from podium.errors import ConfigError
from podium.node.k8s_config import device_plugin, gpu_operator_mig, node_resources

GOLDEN = Path(__file__).with_name("golden")


def gpus(**kw: object) -> GpuInventory:
    return GpuInventory.model_validate(
        {"source": "declared", "count": 2, "type": "h100", "memory_mb": 81920, **kw}
    )


CASES = {
    "k8s-device-plugin-mig.yaml": device_plugin(gpus(mig={0: ["3g.40gb", "1g.10gb"]})),
    "k8s-device-plugin-shards.yaml": device_plugin(
        gpus(sharing={0: {"shards": 4}, 1: {"shards": 4}})
    ),
    "k8s-device-plugin-mps.yaml": device_plugin(gpus(sharing={0: {"mps": 10}, 1: {"mps": 10}})),
    "k8s-gpu-operator-mig.yaml": gpu_operator_mig(gpus(mig={0: ["3g.40gb", "1g.10gb"]})),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_k8s_configs(name: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(CASES[name])
    assert CASES[name] == path.read_text()


def test_the_configs_say_what_podium_does() -> None:
    plain = yaml.safe_load(device_plugin(gpus()))
    assert plain == {"version": "v1", "flags": {"migStrategy": "none", "failOnInitError": True}}
    shards = yaml.safe_load(CASES["k8s-device-plugin-shards.yaml"])
    assert shards["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}
    ]
    mps = yaml.safe_load(CASES["k8s-device-plugin-mps.yaml"])
    assert mps["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 10}]
    operator = yaml.safe_load(CASES["k8s-gpu-operator-mig.yaml"])["mig-configs"]
    assert operator["podium-advised"][1] == {"devices": [1], "mig-enabled": False}
    assert gpu_operator_mig(gpus()) == ""


def test_what_the_device_plugin_cannot_say_is_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        device_plugin(gpus(sharing={1: {"mps": 100}}))
    assert "shares every GPU of a node alike" in str(err.value)
    assert "(GPU 0 whole, GPU 1 mps)" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="cannot share by MPS on a node with MIG enabled"):
        device_plugin(gpus(mig={0: ["7g.80gb"]}, sharing={1: {"mps": 100}}))


def test_the_resources_a_node_advertises() -> None:
    """What kwok's test nodes are given (scripts/k8s-testbed/up.sh --podium-config)."""
    assert node_resources(gpus()) == {"nvidia.com/gpu": 2}
    split = node_resources(gpus(mig={0: ["3g.40gb", "1g.10gb", "1g.10gb"]}))
    assert split == {"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2}
    shared = node_resources(gpus(sharing={0: {"shards": 4}, 1: {"shards": 4}}))
    assert shared == {"nvidia.com/gpu": 8}  # time-slicing replicas
