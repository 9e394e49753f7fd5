"""MPS on a shared GPU: one control daemon per GPU and user, started for the GPU's
first MPS job, stopped when its last one ends, and watched by the health agent.

A GPU shared by MPS (`node.gpus.sharing: {1: {mps: 100}}`) is given out in units
(`--gres=mps:50`: half the GPU). Each job gets:

- CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY: the (GPU, user) server's own
  directories under PODIUM_HOME/mps, private to the user;
- CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: its share of the GPU's SMs;
- CUDA_MPS_PINNED_DEVICE_MEM_LIMIT: a device-memory cap ("0=10G": the job sees one
  GPU), from --mem-per-gpu, else its share of the GPU's memory.

An MPS server runs as one user, so the scheduler never puts two users' MPS jobs on one
GPU at a time (podium.sched.fit.pick_mps). The control daemon is started as the job's
user with the GPU's UUID in CUDA_VISIBLE_DEVICES; without nvidia-cuda-mps-control
(machines without the driver), jobs still get the variables and the start is skipped
with the reason. Nothing here changes a GPU setting (compute mode stays as it is).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from podium.node.health.check_results import Action, Result, Status, skipped

log = logging.getLogger("podium.mps")

CONTROL = "nvidia-cuda-mps-control"
PID_FILE = "nvidia-cuda-mps-control.pid"  # the control daemon writes it in its pipe dir
WANTED = "wanted"  # Podium's marker: a server should run here (uid in it)


@dataclass(frozen=True)
class Share:
    """One job's MPS share: its GPU (index, UUID, memory) and units of `units`."""

    gpu: int
    uuid: str
    gpu_memory_mb: int
    held: int
    units: int

    @property
    def percent(self) -> int:
        """Its share of the GPU's SMs, in percent (at least 1)."""
        return max(1, self.held * 100 // self.units)

    def memory_cap_mb(self, mem_per_gpu_mb: int | None) -> int:
        """The device memory the job may pin: --mem-per-gpu, else its share."""
        if mem_per_gpu_mb:
            return mem_per_gpu_mb
        return self.gpu_memory_mb * self.held // self.units


def memory_limit(mib: int) -> str:
    """CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for the job's one GPU (device 0 to the job)."""
    return f"0={mib // 1024}G" if mib % 1024 == 0 else f"0={mib}MB"


class MpsServers:
    """The MPS control daemons of one node, under `home`/mps/gpu<N>-<uid>/{pipe,log}."""

    def __init__(self, home: Path, control: str | None = None) -> None:
        self.base = home / "mps"
        self.control = control if control is not None else (shutil.which(CONTROL) or "")
        self.live: set[tuple[int, int]] = set(self.wanted())  # (GPU, uid) started, not stopped

    def dirs(self, gpu: int, uid: int) -> tuple[Path, Path]:
        """The pipe and log directories of GPU `gpu`'s server for user `uid`."""
        root = self.base / f"gpu{gpu}-{uid}"
        return root / "pipe", root / "log"

    def environment(self, share: Share, uid: int, mem_per_gpu_mb: int | None) -> dict[str, str]:
        """What a job holding `share` runs with."""
        pipe, logs = self.dirs(share.gpu, uid)
        return {
            "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
            "CUDA_MPS_LOG_DIRECTORY": str(logs),
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(share.percent),
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": memory_limit(share.memory_cap_mb(mem_per_gpu_mb)),
        }

    def ensure(self, share: Share, uid: int, gid: int) -> str | None:
        """Make the server's directories (the user's, 0700) and start its control
        daemon as the user unless it runs. Returns why it was not started, or None."""
        pipe, logs = self.dirs(share.gpu, uid)
        for d in (pipe.parent, pipe, logs):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(d, uid, gid)
        if not self.control:
            return f"{CONTROL} not found: the job shares GPU {share.gpu} without an MPS server"
        if self.running(share.gpu, uid):
            return None
        (pipe.parent / WANTED).write_text(f"{uid}\n")
        self.live.add((share.gpu, uid))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "CUDA_VISIBLE_DEVICES": share.uuid,
            "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
            "CUDA_MPS_LOG_DIRECTORY": str(logs),
        }
        result = subprocess.run(
            [self.control, "-d"],
            env=env,
            user=uid if os.geteuid() == 0 else None,
            group=gid if os.geteuid() == 0 else None,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            why = (result.stderr or result.stdout).strip().splitlines()
            return (
                f"{CONTROL} -d failed on GPU {share.gpu}: {why[-1] if why else result.returncode}"
            )
        log.info("MPS control daemon started on GPU %d for uid %d", share.gpu, uid)
        return None

    def pid(self, gpu: int, uid: int) -> int | None:
        """The control daemon's pid from its pid file, if it is alive."""
        pipe, _ = self.dirs(gpu, uid)
        try:
            pid = int((pipe / PID_FILE).read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def running(self, gpu: int, uid: int) -> bool:
        return self.pid(gpu, uid) is not None

    def wanted(self) -> list[tuple[int, int]]:
        """(GPU, uid) of every server Podium started and has not stopped."""
        out = []
        for marker in sorted(self.base.glob(f"gpu*-*/{WANTED}")) if self.base.is_dir() else []:
            gpu, _, uid = marker.parent.name.removeprefix("gpu").partition("-")
            if gpu.isdigit() and uid.isdigit():
                out.append((int(gpu), int(uid)))
        return out

    def stop_idle(self, in_use: set[tuple[int, int]]) -> list[tuple[int, int]]:
        """Stop the servers no running MPS job uses any more ((GPU, uid) not in
        `in_use`): `quit` to the control daemon as its user, SIGTERM if it does not
        listen. Returns those stopped."""
        stopped = []
        for gpu, uid in sorted(self.live):
            if (gpu, uid) in in_use:
                continue
            self._stop(gpu, uid)
            stopped.append((gpu, uid))
        return stopped

    def _stop(self, gpu: int, uid: int) -> None:
        pipe, logs = self.dirs(gpu, uid)
        pid = self.pid(gpu, uid)
        if pid is not None and self.control:
            env = {"CUDA_MPS_PIPE_DIRECTORY": str(pipe), "CUDA_MPS_LOG_DIRECTORY": str(logs)}
            try:
                subprocess.run(
                    [self.control],
                    input="quit\n",
                    env=env,
                    user=uid if os.geteuid() == 0 else None,
                    capture_output=True,
                    text=True,
                    timeout=30,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGTERM)
        (pipe.parent / WANTED).unlink(missing_ok=True)
        self.live.discard((gpu, uid))
        log.info("MPS control daemon of GPU %d for uid %d stopped", gpu, uid)


class MpsCheck:
    """Quick check: every MPS control daemon Podium started is alive. A dead one fails
    its GPU only (the GPU's MPS clients have lost their server)."""

    name = "mps"
    deep = False

    def __init__(self, servers: MpsServers) -> None:
        self.servers = servers

    def run(self) -> list[Result]:
        if not self.servers.control:
            return [skipped(self.name, f"{CONTROL} is not installed: no MPS servers to watch")]
        wanted = self.servers.wanted()
        dead = [(gpu, uid) for gpu, uid in wanted if not self.servers.running(gpu, uid)]
        if not dead:
            return [Result(self.name, Status.OK, f"{len(wanted)} MPS server(s) alive")]
        return [
            Result(
                self.name,
                Status.CRITICAL,
                f"the MPS control daemon of GPU {gpu} (uid {uid}) is gone",
                Action.DRAIN,
                gpu=gpu,
            )
            for gpu, uid in dead
        ]


__all__ = ["CONTROL", "MpsCheck", "MpsServers", "Share", "memory_limit"]
