"""Recorded NVML values behind the same seam as pynvml: the one stand-in for a GPU.

`load_nvml()` is where Podium gets NVML: pynvml, unless $PODIUM_NVML_REPLAY names a
JSON recording of what NVML answered on a real machine, in which case `RecordedNvml`
answers the same calls with those values (including the errors a driver raises, such
as NotSupported for retired pages on Hopper). Everything above the seam, inventory,
health checks, device confinement and the demo's sizing, is the real code path.

A recording:

    {"gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-...", "pci": "00000000:19:00.0",
               "minor": 0, "device": "/dev/nvidia0", "memory_total_mb": 81559,
               "memory_used_mb": 480, "ecc_uncorrected_volatile": 0,
               "retired_pages": "not_supported", "row_remap": [false, false],
               "temperature_c": 40, "recovery_action": 0, "clocks_event_reasons": 1,
               "processes": [[pid, mib], ...]}]}

Links (podium.node.health.links), where recorded; a GPU without them answers
NotSupported, as a driver does for a GPU that lacks them:

    "nvlinks": [1, 1, 0, ...] (each link's state), "utilization_gpu": 97,
    "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
    "fabric": {"state": 3, "status": 0}

Any value may be "not_supported" or "gpu_lost" to raise that NVML error. A GPU in MIG
mode adds its MIG devices, as NVML lists them:

    "mig": [{"uuid": "MIG-...", "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb",
             "memory_total_mb": 9856, "gi": 9, "ci": 0, "start": 6}, ...]
"""

from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "PODIUM_NVML_REPLAY"


class NVMLError(Exception):
    """An NVML error with its return code (`value`), as pynvml raises them."""

    def __init__(self, value: int, name: str) -> None:
        super().__init__(name)
        self.value = value


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3, "Not Supported")


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self) -> None:
        super().__init__(15, "GPU is lost")


_ERRORS = {"not_supported": NVMLError_NotSupported, "gpu_lost": NVMLError_GpuIsLost}


@dataclass
class _Memory:
    total: int
    used: int
    free: int


@dataclass
class _Pci:
    busId: str


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None


class c_nvmlGpuFabricInfo_t(ctypes.Structure):
    """pynvml's structure, filled in by nvmlDeviceGetGpuFabricInfo (through byref)."""

    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_uint),
    ]


@dataclass
class _Utilization:
    gpu: int
    memory: int


@dataclass
class _AccountingStats:
    startTime: int  # microseconds since the epoch
    maxMemoryUsage: int | None  # bytes
    isRunning: int


@dataclass(frozen=True)
class MigHandle:
    """A MIG device's handle: its GPU's handle and its slot."""

    gpu: int
    slot: int


@dataclass
class _Placement:
    start: int
    size: int


@dataclass
class _GpuInstanceInfo:
    placement: _Placement


@dataclass
class _Field:
    nvmlReturn: int
    value: Any


class RecordedNvml:
    """The pynvml calls Podium makes, answered from a recording."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_TEMPERATURE_GPU = 0
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1

    def __init__(self, recording: dict[str, Any]) -> None:
        self.gpus: list[dict[str, Any]] = list(recording.get("gpus", []))

    @classmethod
    def from_file(cls, path: Path) -> RecordedNvml:
        return cls(json.loads(path.read_text()))

    def _value(self, handle: int | MigHandle, key: str, default: Any = None) -> Any:
        record = self._mig(handle) if isinstance(handle, MigHandle) else self.gpus[handle]
        value = record.get(key, default)
        if isinstance(value, str) and value in _ERRORS:
            raise _ERRORS[value]()
        return value

    def _mig(self, handle: MigHandle) -> dict[str, Any]:
        return dict(self.gpus[handle.gpu]["mig"][handle.slot])

    # MIG: mode, devices, their instances (podium.node.slices)

    def nvmlDeviceGetMigMode(self, handle: int) -> tuple[int, int]:
        if "mig" not in self.gpus[handle]:
            raise NVMLError_NotSupported()
        mode = 1 if self.gpus[handle]["mig"] else 0
        return (mode, mode)

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: int) -> int:
        return 7 if self.gpus[handle].get("mig") else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: int, slot: int) -> MigHandle:
        if slot >= len(self.gpus[handle].get("mig") or []):
            raise NVMLError(6, "Not Found")
        return MigHandle(handle, slot)

    def nvmlDeviceGetGpuInstanceId(self, handle: MigHandle) -> int:
        return int(self._value(handle, "gi"))

    def nvmlDeviceGetComputeInstanceId(self, handle: MigHandle) -> int:
        return int(self._value(handle, "ci", 0))

    def nvmlDeviceGetGpuInstanceById(self, handle: int, gi: int) -> MigHandle:
        for slot, device in enumerate(self.gpus[handle].get("mig") or []):
            if device.get("gi") == gi:
                return MigHandle(handle, slot)
        raise NVMLError(6, "Not Found")

    def nvmlGpuInstanceGetInfo(self, instance: MigHandle) -> _GpuInstanceInfo:
        start = self._value(instance, "start")
        if start is None:
            raise NVMLError(4, "Insufficient Permissions")
        return _GpuInstanceInfo(_Placement(int(start), 0))

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.gpus):
            raise NVMLError(2, "Invalid Argument")
        return index

    def nvmlDeviceGetName(self, handle: int | MigHandle) -> str:
        return str(self._value(handle, "name", "NVIDIA GPU"))

    def nvmlDeviceGetUUID(self, handle: int | MigHandle) -> str:
        return str(self._value(handle, "uuid", f"GPU-recorded-{handle}"))

    def nvmlDeviceGetPciInfo(self, handle: int) -> _Pci:
        return _Pci(str(self._value(handle, "pci", f"00000000:{handle:02x}:00.0")))

    def nvmlDeviceGetMinorNumber(self, handle: int) -> int:
        return int(self._value(handle, "minor", handle))

    def device_file(self, handle: int) -> str:
        """The GPU's device file: the recording's "device", else /dev/nvidia<minor>."""
        minor = self.nvmlDeviceGetMinorNumber(handle)
        return str(self.gpus[handle].get("device") or f"/dev/nvidia{minor}")

    def nvmlDeviceGetMemoryInfo(self, handle: int | MigHandle) -> _Memory:
        total = int(self._value(handle, "memory_total_mb", 81559)) << 20
        used = int(self._value(handle, "memory_used_mb", 0)) << 20
        return _Memory(total, used, total - used)

    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        return 10

    def nvmlDeviceGetTotalEccErrors(self, handle: int, kind: int, counter: int) -> int:
        return int(self._value(handle, "ecc_uncorrected_volatile", 0))

    def nvmlDeviceGetRetiredPages(self, handle: int, cause: int) -> list[int]:
        count = int(self._value(handle, "retired_pages", 0))
        return list(range(count)) if cause == 1 else []

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, bool, bool]:
        pending, failed = self._value(handle, "row_remap", [False, False])
        return (0, 0, bool(pending), bool(failed))

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return int(self._value(handle, "temperature_c", 40))

    def nvmlDeviceGetFieldValues(self, handle: int, fields: list[int]) -> list[_Field]:
        action = self._value(handle, "recovery_action", 0)

        class _Union:
            uiVal = int(action)

        return [_Field(0, _Union())]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return int(self._value(handle, "clocks_event_reasons", 1))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[_Process]:
        procs = self._value(handle, "processes", [])
        return [_Process(int(pid), None if mib is None else int(mib) << 20) for pid, mib in procs]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[_Process]:
        return []

    # links: "nvlinks", "pcie", "fabric", "utilization_gpu" (NotSupported where absent)

    c_nvmlGpuFabricInfo_t = c_nvmlGpuFabricInfo_t

    def _recorded(self, handle: int, key: str) -> Any:
        value = self._value(handle, key, "not_supported")
        if value == "not_supported":
            raise NVMLError_NotSupported()
        return value

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        links = self._recorded(handle, "nvlinks")
        if link >= len(links):
            raise NVMLError_NotSupported()  # a link the GPU does not have
        return int(links[link])

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return int(self._recorded(handle, "pcie")["gen"])

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle: int) -> int:
        return int(self._recorded(handle, "pcie")["max_gen"])

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return int(self._recorded(handle, "pcie")["width"])

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return int(self._recorded(handle, "pcie")["max_width"])

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> _Utilization:
        return _Utilization(int(self._value(handle, "utilization_gpu", 0)), 0)

    def nvmlDeviceGetGpuFabricInfo(self, handle: int, info: Any) -> int:
        fabric = self._recorded(handle, "fabric")
        target = info._obj  # what ctypes.byref points at, as the driver fills it
        target.state, target.status = int(fabric["state"]), int(fabric.get("status", 0))
        return 0

    # accounting: {"accounting": {"mode": 0|1, "processes": [[pid, start_epoch_s, max_mib]]}}

    def nvmlDeviceGetAccountingMode(self, handle: int) -> int:
        return int(self._value(handle, "accounting", {}).get("mode", 0))

    def nvmlDeviceGetAccountingPids(self, handle: int) -> list[int]:
        return [int(p[0]) for p in self._value(handle, "accounting", {}).get("processes", [])]

    def nvmlDeviceGetAccountingStats(self, handle: int, pid: int) -> _AccountingStats:
        for p_id, start, mib in self._value(handle, "accounting", {}).get("processes", []):
            if int(p_id) == pid:
                return _AccountingStats(int(float(start) * 1e6), int(mib) << 20, 0)
        raise NVMLError(13, "Not Found")


def load_nvml() -> Any:
    """NVML for this process: the recording named by $PODIUM_NVML_REPLAY, else pynvml.
    Raises ImportError when pynvml is not installed."""
    replay = os.environ.get(ENV)
    if replay:
        return RecordedNvml.from_file(Path(replay))
    import pynvml

    return pynvml


__all__ = ["ENV", "MigHandle", "NVMLError", "RecordedNvml", "load_nvml"]
