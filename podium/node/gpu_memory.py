"""GPU memory per job, from NVML's per-process memory: each process on each GPU (compute
and graphics contexts) summed by the job whose session it runs in (a job's processes
run in its supervisor's session). What the health agent's GPU probe reads, sampled for
`podium acct`'s high-water mark; None where NVML does not answer (declared GPUs).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

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


__all__ = ["by_job", "process_memory"]
