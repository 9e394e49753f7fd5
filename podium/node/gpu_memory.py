"""GPU memory per job, from NVML's per-process memory: each process on each GPU (compute
and graphics contexts) summed by the job whose session it runs in (a job's processes
run in its supervisor's session). What the health agent's GPU probe reads, sampled for
`podium acct`'s high-water mark; None where NVML does not answer (declared GPUs).

At a job's end its processes are gone from that list; NVML's accounting keeps each
process's high-water mark after it exits, where the administrator turned accounting
mode on (`nvidia-smi -am 1`; Podium never changes a GPU's settings).
`accounted_memory` reads it for a job that held whole GPUs, so a job shorter than the
sampling interval still has its figure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from podium.node.inventory import NvmlSeam, nvml_session


def process_memory(nvml: NvmlSeam | None = None) -> dict[int, int] | None:
    """MiB each process holds, summed over the GPUs; None when NVML cannot be read."""
    with nvml_session(nvml) as session:
        if session is None:
            return None
        used: dict[int, int] = {}
        for index in range(session.nvmlDeviceGetCount()):
            handle = session.nvmlDeviceGetHandleByIndex(index)
            for call in (
                "nvmlDeviceGetComputeRunningProcesses",
                "nvmlDeviceGetGraphicsRunningProcesses",
            ):
                try:
                    processes = getattr(session, call)(handle)
                except Exception:  # NotSupported, a lost GPU: the others still count
                    continue
                for p in processes:
                    if p.usedGpuMemory is not None:  # None: not allowed to see it
                        used[p.pid] = used.get(p.pid, 0) + int(p.usedGpuMemory) // (1 << 20)
        return used


def by_job(used: Mapping[int, int], sessions: Mapping[int, int]) -> dict[int, int]:
    """MiB per job: each process's memory added to the job whose session (supervisor
    pid -> job id in `sessions`) it runs in; processes of no job are left out."""
    out: dict[int, int] = {}
    for pid, mib in used.items():
        try:
            job = sessions.get(os.getsid(pid))
        except OSError:  # gone since NVML listed it
            continue
        if job is not None:
            out[job] = out.get(job, 0) + mib
    return out


NVML_FEATURE_ENABLED = 1
_SLACK_US = 1_000_000  # clocks: a process started this close to the job's start is its


def accounted_memory(
    gpus: Iterable[int], since: float, until: float, nvml: NvmlSeam | None = None
) -> int | None:
    """MiB the processes that started on whole GPUs `gpus` between `since` and `until`
    (epoch seconds: a job's run, while it held them alone) held at most, by NVML's
    accounting: the sum of each process's high-water mark (one process per GPU, as
    training runs, makes it exact; several make it an upper bound, as Slurm sums its
    tasks' maxima). None when NVML cannot be read or a GPU's accounting mode is off."""
    low, high = int(since * 1e6) - _SLACK_US, int(until * 1e6) + _SLACK_US
    with nvml_session(nvml) as seam:
        if seam is None:
            return None
        session: Any = seam  # the accounting calls are pynvml's, not the seam's minimum
        total = 0
        for index in gpus:
            try:
                handle = session.nvmlDeviceGetHandleByIndex(index)
                if session.nvmlDeviceGetAccountingMode(handle) != NVML_FEATURE_ENABLED:
                    return None
                pids = list(session.nvmlDeviceGetAccountingPids(handle))
            except Exception:  # NotSupported, a lost GPU, an older driver
                return None
            for pid in pids:
                try:
                    stats = session.nvmlDeviceGetAccountingStats(handle, pid)
                except Exception:  # dropped from the driver's buffer meanwhile
                    continue
                if low <= int(stats.startTime) <= high and stats.maxMemoryUsage is not None:
                    total += int(stats.maxMemoryUsage) // (1 << 20)
        return total


__all__ = ["accounted_memory", "by_job", "process_memory"]
