"""Per-GPU telemetry for /metrics under dcgm-exporter's field names: utilisation,
framebuffer used and free, temperature and power, from NVML where it answers. A value
NVML does not give (no driver, a declared GPU, an unsupported field) is left out, never
reported as zero. NVML is reached through the same seam as the inventory, so tests
give recorded values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from podium.node.inventory import NvmlSeam, nvml_session

MIB = 1024 * 1024

# dcgm-exporter's default counters this reads, with how NVML gives each.
FIELDS: dict[str, Callable[[Any, Any], float]] = {
    "DCGM_FI_DEV_GPU_UTIL": lambda n, h: float(n.nvmlDeviceGetUtilizationRates(h).gpu),
    "DCGM_FI_DEV_FB_USED": lambda n, h: n.nvmlDeviceGetMemoryInfo(h).used / MIB,
    "DCGM_FI_DEV_FB_FREE": lambda n, h: n.nvmlDeviceGetMemoryInfo(h).free / MIB,
    "DCGM_FI_DEV_GPU_TEMP": lambda n, h: float(
        n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
    ),
    "DCGM_FI_DEV_POWER_USAGE": lambda n, h: n.nvmlDeviceGetPowerUsage(h) / 1000.0,
}


def read_telemetry(indices: list[int], nvml: NvmlSeam | None = None) -> dict[int, dict[str, float]]:
    """{GPU index: {field: value}} for the GPUs at `indices` (NVML's order); {} when
    NVML cannot be read here. Fields NVML refuses for a GPU are left out."""
    out: dict[int, dict[str, float]] = {}
    with nvml_session(nvml) as session:
        if session is None:
            return out
        n: Any = session
        for index in indices:
            try:
                handle = n.nvmlDeviceGetHandleByIndex(index)
            except Exception:
                continue
            values: dict[str, float] = {}
            for field, read in FIELDS.items():
                try:
                    values[field] = float(read(n, handle))
                except Exception:  # NVMLError_NotSupported and kin: left out
                    continue
            out[index] = values
    return out


def no_telemetry(indices: list[int]) -> dict[int, dict[str, float]]:
    """What declared GPUs give: nothing (no NVML behind them)."""
    return {}


__all__ = ["FIELDS", "no_telemetry", "read_telemetry"]
