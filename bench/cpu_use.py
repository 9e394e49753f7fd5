"""Measuring CPU and memory for the benchmarks: of one process, of a group of
processes with their children, of a cpuacct cgroup (v1), of the whole machine."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil

TICKS = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (NaN for none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def group_cpu_seconds(pids: list[int]) -> float:
    """CPU seconds of `pids` so far, each with its children (those waited for and
    those still running)."""
    used = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            t = proc.cpu_times()
            used += t.user + t.system + t.children_user + t.children_system
            for child in proc.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    c = child.cpu_times()
                    used += c.user + c.system
    return used


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (not idle, iowait or steal)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / TICKS


class CpuGroup:
    """A cpuacct cgroup the cluster's processes are moved into (their children follow)."""

    def __init__(self, name: str) -> None:
        self.path = CPUACCT / f"podium-bench-{name}-{os.getpid()}"
        self.path.mkdir()

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            (self.path / "cgroup.procs").write_text(str(pid))

    def usage_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():
            (CPUACCT / "cgroup.procs").write_text(pid)
        self.path.rmdir()


def idle_cpu(controller: int, cluster: list[int], seconds: float = 20.0) -> tuple[float, float]:
    """% of one core used over `seconds` by the controller, and by the whole cluster."""
    before, whole = cpu_seconds(controller), group_cpu_seconds(cluster)
    time.sleep(seconds)
    return (
        100.0 * (cpu_seconds(controller) - before) / seconds,
        100.0 * (group_cpu_seconds(cluster) - whole) / seconds,
    )
