"""MPS shares: the job's variables and caps, the servers' directories and markers, and
the health check of the control daemons (podium.node.mps)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from podium.node.health.check_results import Action, Status
from podium.node.mps import MpsCheck, MpsServers, Share, memory_limit

H100 = Share(gpu=1, uuid="GPU-b", gpu_memory_mb=81920, held=50, units=100)


def test_a_share_gets_its_threads_and_memory() -> None:
    servers = MpsServers(Path("/srv/podium"), control="")
    env = servers.environment(H100, 1000, None)
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": "/srv/podium/mps/gpu1-1000/pipe",
        "CUDA_MPS_LOG_DIRECTORY": "/srv/podium/mps/gpu1-1000/log",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=40G",  # half of 80 GiB
    }
    assert servers.environment(H100, 1000, 10240)["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=10G"
    assert Share(0, "GPU-a", 81559, 25, 100).memory_cap_mb(None) == 20389
    assert memory_limit(20389) == "0=20389MB"
    assert Share(0, "GPU-a", 81920, 1, 4).percent == 25  # units need not be percents


def test_without_the_control_binary_the_start_is_skipped_with_the_reason(tmp_path: Path) -> None:
    servers = MpsServers(tmp_path, control="")
    why = servers.ensure(H100, os.getuid(), os.getgid())
    assert why == "nvidia-cuda-mps-control not found: the job shares GPU 1 without an MPS server"
    pipe, logs = servers.dirs(1, os.getuid())
    assert pipe.is_dir() and logs.is_dir() and (pipe.stat().st_mode & 0o777) == 0o700
    assert servers.live == set()
    (result,) = MpsCheck(servers).run()
    assert result.skipped and "not installed" in result.reason


def test_a_dead_control_daemon_fails_only_its_gpu(tmp_path: Path) -> None:
    servers = MpsServers(tmp_path, control="/usr/bin/nvidia-cuda-mps-control")
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer runs
    for gpu, pid in ((1, os.getpid()), (2, dead.pid)):
        pipe, _ = servers.dirs(gpu, 1000)
        pipe.mkdir(parents=True)
        (pipe / "nvidia-cuda-mps-control.pid").write_text(f"{pid}\n")
        (pipe.parent / "wanted").write_text("1000\n")
    assert MpsServers(tmp_path, control="x").live == {(1, 1000), (2, 1000)}  # after a restart
    (result,) = MpsCheck(servers).run()
    assert (result.status, result.action, result.gpu) == (Status.CRITICAL, Action.DRAIN, 2)
    assert result.reason == "the MPS control daemon of GPU 2 (uid 1000) is gone"


def test_idle_servers_are_stopped_and_forgotten(tmp_path: Path) -> None:
    servers = MpsServers(tmp_path, control="")
    for gpu in (1, 2):
        pipe, _ = servers.dirs(gpu, 1000)
        pipe.mkdir(parents=True)
        (pipe.parent / "wanted").write_text("1000\n")
    servers.live = set(servers.wanted())
    assert servers.stop_idle({(1, 1000)}) == [(2, 1000)]
    assert servers.wanted() == [(1, 1000)] and servers.live == {(1, 1000)}
