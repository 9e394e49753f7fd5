"""The NVIDIA driver inside a container (podium.run.containers.nvidia, podium.run.containers.gpus):
what ldconfig's list yields, what NVIDIA_VISIBLE_DEVICES and NVIDIA_DRIVER_CAPABILITIES
ask, where the files go, which /proc entries are hidden and how CUDA numbers the GPUs
inside. No GPU needed: the host's files are made in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.run.containers import nvidia
from podium.run.containers.gpus import hidden_entries, renumbered

LDCONFIG = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibnvidia-ml.so.1 (libc6) => /usr/lib/i386-linux-gnu/libnvidia-ml.so.1
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so
\tlibnvcuvid.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvcuvid.so.1
\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6
"""

GPUS: list[dict[str, object]] = [
    {"index": 2, "uuid": "GPU-aaa", "device": "/dev/nvidia2"},
    {"index": 5, "uuid": "GPU-bbb", "device": "/dev/nvidia5"},
]


def test_ldconfig_gives_the_drivers_64_bit_libraries_only() -> None:
    found = nvidia.driver_files(LDCONFIG, "x86_64")
    libraries = [f for f in found if "/lib" in f]
    assert libraries == [
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so",
        "/usr/lib/x86_64-linux-gnu/libnvcuvid.so.1",
    ]


def test_no_visible_devices_or_void_means_no_driver_at_all() -> None:
    for env in ({}, {"NVIDIA_VISIBLE_DEVICES": "void"}, {"NVIDIA_VISIBLE_DEVICES": ""}):
        request = nvidia.Request.of(env)
        assert request.devices is None
        assert request.files(["/x/libcuda.so.1", "/x/nvidia-smi"]) == []
        assert request.devices_of(GPUS) == GPUS  # the job's devices stay its own


def test_capabilities_choose_the_files_and_utility_is_the_default() -> None:
    files = ["/x/libnvidia-ml.so.1", "/x/libcuda.so.1", "/x/nvidia-smi", "/x/libnvcuvid.so.1"]
    default = nvidia.Request.of({"NVIDIA_VISIBLE_DEVICES": "all"})
    assert default.capabilities == {"utility"}
    assert default.files(files) == ["/x/libnvidia-ml.so.1", "/x/nvidia-smi"]
    compute = nvidia.Request.of(
        {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}
    )
    assert compute.files(files) == files[:3]
    every = nvidia.Request.of(
        {"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "all"}
    )
    assert every.files(files) == files


def test_an_unknown_capability_is_refused_in_one_line() -> None:
    with pytest.raises(nvidia.DriverError) as caught:
        nvidia.Request.of({"NVIDIA_VISIBLE_DEVICES": "all", "NVIDIA_DRIVER_CAPABILITIES": "cmpute"})
    assert "'cmpute'" in str(caught.value) and "compute" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_visible_devices_pick_among_the_jobs_gpus_only() -> None:
    def pick(value: str) -> list[object]:
        request = nvidia.Request.of({"NVIDIA_VISIBLE_DEVICES": value})
        return [g["index"] for g in request.devices_of(GPUS)]

    assert pick("all") == [2, 5]
    assert pick("none") == []
    assert pick("5") == [5]
    assert pick("GPU-aaa") == [2]
    assert pick("0,1,2") == [2]  # GPUs 0 and 1 are not the job's: never given


def test_the_layout_binds_real_files_and_names_them_as_the_host_does(tmp_path: Path) -> None:
    lib = tmp_path / "libnvidia-ml.so.580.82"
    lib.write_text("elf")
    (tmp_path / "libnvidia-ml.so.1").symlink_to(lib.name)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n")
    binds, links = nvidia.layout([str(tmp_path / "libnvidia-ml.so.1"), str(smi)])
    assert binds == [
        (str(lib), "/usr/local/nvidia/lib64/libnvidia-ml.so.580.82"),
        (str(smi), "/usr/local/nvidia/bin/nvidia-smi"),
    ]
    assert links == [
        ("/usr/local/nvidia/lib64/libnvidia-ml.so.1", "libnvidia-ml.so.580.82"),
        ("/usr/local/nvidia/lib64/libnvidia-ml.so", "libnvidia-ml.so.1"),
    ]


def test_other_gpus_proc_entries_are_hidden_by_device_minor(tmp_path: Path) -> None:
    for bus, minor in (("0000:18:00.0", 0), ("0000:2a:00.0", 2), ("0000:3a:00.0", 5)):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 16\nDevice Minor: \t {minor}\n"
        )
    (tmp_path / "0000:ff:00.0").mkdir()  # unreadable: hidden
    assert hidden_entries(str(tmp_path), {2}) == ["0000:18:00.0", "0000:3a:00.0", "0000:ff:00.0"]
    assert hidden_entries(str(tmp_path / "absent"), {2}) == []


def test_cuda_numbers_the_containers_gpus_from_zero_in_host_order() -> None:
    assert renumbered("2,5", GPUS) == "0,1"
    assert renumbered("5", GPUS) == "1"
    assert renumbered("5", GPUS[1:]) == "0"  # NVIDIA_VISIBLE_DEVICES=5: one GPU inside
    assert renumbered("2,5", []) == ""
