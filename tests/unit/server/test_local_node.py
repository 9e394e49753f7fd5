"""What a job may open on the node, with MIG slices sharing their GPU's device file."""

from __future__ import annotations

import os

from podium.config.cluster import ClusterConfig
from podium.node.inventory import GpuInfo
from podium.run.containers.gpus import renumbered
from podium.run.task_env import CUDA_NAMES, cuda_visible
from podium.server.local_node import LocalNode


def number(path: str) -> tuple[str, int, int]:
    rdev = os.stat(path).st_rdev
    return ("c", os.major(rdev), os.minor(rdev))


def node() -> LocalNode:
    """GPU 0 (/dev/null) split in two slices (capability files /dev/full, /dev/random),
    GPU 1 (/dev/zero) whole: real character devices stand for the GPUs' files."""
    gpus = [
        GpuInfo(0, "h100", 81920, "GPU-a", device="/dev/null"),
        GpuInfo(1, "h100", 81920, "GPU-b", device="/dev/zero"),
    ]
    slices = [
        GpuInfo(2, "3g.40gb", 40960, "MIG-x", device="/dev/null", parent=0, caps=("/dev/full",)),
        GpuInfo(3, "3g.40gb", 40960, "MIG-y", device="/dev/null", parent=0, caps=("/dev/random",)),
    ]
    config = ClusterConfig.model_validate({"node": {"name": "n0", "cpus": 1, "memory_mb": 1000}})
    return LocalNode.from_config(config, gpus, slices)


def test_a_slice_opens_its_gpu_and_its_own_capabilities_only() -> None:
    n = node()
    assert [d.index for d in n.devices] == [1, 2, 3]
    assert n.parent_of(3) == 0 and n.parent_of(1) == 1
    assert (n.devices_for("3g.40gb"), n.devices_for(None), n.devices_for("h100")) == (
        [2, 3],
        [1],
        [1],
    )
    assert set(n.denied_devices([2])) == {number("/dev/zero"), number("/dev/random")}
    assert set(n.denied_devices([1])) == {
        number("/dev/null"),
        number("/dev/full"),
        number("/dev/random"),
    }
    assert set(n.denied_devices([1, 2, 3])) == set()


def test_cuda_names_a_slice_by_its_uuid_inside_and_outside_a_container() -> None:
    env = {CUDA_NAMES: "2=MIG-x,3=MIG-y"}
    assert cuda_visible([1, 3], env) == "1,MIG-y"
    assert cuda_visible([1, 3], {}) == "1,3"
    visible: list[dict[str, object]] = [{"index": 0}, {"index": 1}]  # slice 3's GPU, GPU 1
    assert renumbered("1,MIG-y", visible) == "1,MIG-y"
    assert renumbered("GPU-b", visible) == "GPU-b"  # an MPS share's GPU


def test_a_grant_names_each_gpu_as_cuda_must_see_it() -> None:
    gpus = [GpuInfo(0, "h100", 81920, "GPU-a"), GpuInfo(1, "h100", 81920, "GPU-b")]
    slices = [GpuInfo(2, "3g.40gb", 40960, "MIG-x", parent=0, kind="mig")]
    config = ClusterConfig.model_validate({"node": {"name": "n0", "cpus": 4, "memory_mb": 1000}})
    n = LocalNode.from_config(config, gpus, slices)
    grant = n.grant_of((1, 2), 2, 500, (0, 1))
    assert (grant.units, grant.gpu_ids, grant.cuda_names) == ((1, 2), (1, 2), ("1", "MIG-x"))
    assert (grant.cpus, grant.mem_mb, grant.cpu_ids) == (2, 500, (0, 1))
    assert grant.cuda_names_by_index() == "2=MIG-x"  # what srun in the job reads
    assert cuda_visible([2, 1], {CUDA_NAMES: grant.cuda_names_by_index()}) == "MIG-x,1"
