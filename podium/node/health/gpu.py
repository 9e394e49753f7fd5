"""GPU checks through the NVML seam: count, ECC, retired pages, row remapping,
temperature, throttle reasons, the driver's recovery action, and memory left allocated
after a job.

Thresholds (DESIGN.md): count != expected -> reboot (replace if it recurs); uncorrected
volatile ECC > 0 -> drain; retired pages > 10 -> drain; row remap pending -> reset,
failed -> replace; temperature > 84 C -> drain; leftover memory > 15 MiB -> clean;
NVML recovery action reset/reboot/drain -> that; hardware or thermal throttling ->
warning, recorded against the GPU.
Without NVML every check is unknown, "skipped: no NVML", never a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from podium.node.health.base import Action, Result, Status


class GpuProbe(Protocol):
    """What the GPU checks read. The real one wraps pynvml; tests give recorded values."""

    def count(self) -> int: ...
    def ecc_uncorrected_volatile(self, index: int) -> int: ...
    def retired_pages(self, index: int) -> int: ...
    def row_remap(self, index: int) -> tuple[bool, bool]: ...  # (pending, failed)
    def temperature_c(self, index: int) -> int: ...
    def used_memory_mb(self, index: int) -> float: ...
    def recovery_action(self, index: int) -> int | None: ...  # NVML_GPU_RECOVERY_ACTION_*
    def throttle_reasons(self, index: int) -> int: ...  # nvmlClocksEventReason bit mask


# NVML's recovery action field (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, driver >= 550): what
# the driver says the GPU needs. 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P,
# 4 drain and reset.
FI_GPU_RECOVERY_ACTION = 271
RECOVERY_ACTIONS = {
    1: ("GPU reset", Action.RESET),
    2: ("node reboot", Action.REBOOT),
    3: ("drain peer-to-peer traffic", Action.DRAIN),
    4: ("drain and reset", Action.RESET),
}
# Throttle (clock event) reasons that mean hardware trouble rather than a busy GPU.
HW_SLOWDOWN = 0x08
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
SW_THERMAL_SLOWDOWN = 0x20
THROTTLE_NAMES = {
    HW_SLOWDOWN: "hardware slowdown",
    HW_THERMAL_SLOWDOWN: "hardware thermal slowdown",
    HW_POWER_BRAKE_SLOWDOWN: "power brake slowdown",
    SW_THERMAL_SLOWDOWN: "software thermal slowdown",
}


@dataclass(frozen=True)
class GpuThresholds:
    max_retired_pages: int = 10
    max_temperature_c: int = 84
    max_leftover_mb: float = 15.0


class NvmlProbe:
    """GpuProbe over pynvml (opened per call; cheap next to the check interval)."""

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            import pynvml

            nvml = pynvml
        self.nvml = nvml
        nvml.nvmlInit()

    def _h(self, index: int) -> Any:
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def count(self) -> int:
        return int(self.nvml.nvmlDeviceGetCount())

    def ecc_uncorrected_volatile(self, index: int) -> int:
        n = self.nvml
        return int(
            n.nvmlDeviceGetTotalEccErrors(
                self._h(index), n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_VOLATILE_ECC
            )
        )

    def retired_pages(self, index: int) -> int:
        n = self.nvml
        total = 0
        for cause in (
            n.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
            n.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        ):
            total += len(n.nvmlDeviceGetRetiredPages(self._h(index), cause))
        return total

    def row_remap(self, index: int) -> tuple[bool, bool]:
        info = self.nvml.nvmlDeviceGetRemappedRows(self._h(index))
        return bool(info[2]), bool(info[3])

    def temperature_c(self, index: int) -> int:
        n = self.nvml
        return int(n.nvmlDeviceGetTemperature(self._h(index), n.NVML_TEMPERATURE_GPU))

    def used_memory_mb(self, index: int) -> float:
        return float(self.nvml.nvmlDeviceGetMemoryInfo(self._h(index)).used) / (1024 * 1024)

    def recovery_action(self, index: int) -> int | None:
        """The driver's recommended recovery action; None where the driver lacks it."""
        try:
            [value] = self.nvml.nvmlDeviceGetFieldValues(self._h(index), [FI_GPU_RECOVERY_ACTION])
            if getattr(value, "nvmlReturn", 0) != 0:
                return None
            return int(value.value.uiVal)
        except Exception:
            return None

    def throttle_reasons(self, index: int) -> int:
        n = self.nvml
        getter = (
            getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or n.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return int(getter(self._h(index)))


class GpuChecks:
    """All per-GPU NVML checks in one pass; `idle` GPUs are also checked for leftovers."""

    name = "gpu"
    deep = False

    def __init__(
        self,
        probe: GpuProbe | None,
        expected: int,
        thresholds: GpuThresholds | None = None,
        idle: set[int] | None = None,
    ) -> None:
        self.probe = probe
        self.expected = expected
        self.t = thresholds or GpuThresholds()
        self.idle = idle or set()

    def run(self) -> list[Result]:
        probe = self.probe
        if probe is None:
            return [Result(self.name, Status.UNKNOWN, "skipped: no NVML on this machine")]
        results: list[Result] = []
        count = probe.count()
        if count != self.expected:
            results.append(
                Result(
                    "gpu_count",
                    Status.CRITICAL,
                    f"{count} GPUs visible, {self.expected} expected",
                    Action.REBOOT,
                )
            )
        else:
            results.append(Result("gpu_count", Status.OK, f"{count} GPUs visible"))
        for i in range(count):

            def critical(check: str, reason: str, action: Action, gpu: int = i) -> None:
                results.append(Result(check, Status.CRITICAL, f"GPU {gpu}: {reason}", action, gpu))

            ecc = probe.ecc_uncorrected_volatile(i)
            if ecc > 0:
                critical("ecc", f"{ecc} uncorrected volatile ECC errors", Action.DRAIN)
            pages = probe.retired_pages(i)
            if pages > self.t.max_retired_pages:
                critical(
                    "retired_pages",
                    f"{pages} retired pages (> {self.t.max_retired_pages})",
                    Action.DRAIN,
                )
            pending, failed = probe.row_remap(i)
            if failed:
                critical("row_remap", "row remap failed", Action.REPLACE)
            elif pending:
                critical("row_remap", "row remap pending (reset needed)", Action.RESET)
            temp = probe.temperature_c(i)
            if temp > self.t.max_temperature_c:
                critical("temperature", f"{temp} C (> {self.t.max_temperature_c} C)", Action.DRAIN)
            recovery = probe.recovery_action(i)
            if recovery in RECOVERY_ACTIONS:
                what, action = RECOVERY_ACTIONS[recovery]
                critical("recovery_action", f"the driver asks for {what}", action)
            reasons = probe.throttle_reasons(i)
            slow = [name for bit, name in THROTTLE_NAMES.items() if reasons & bit]
            if slow:
                results.append(
                    Result(
                        "throttle",
                        Status.WARNING,
                        f"GPU {i}: clocks throttled: {', '.join(slow)}",
                        Action.RECORD,
                        i,
                    )
                )
            if i in self.idle:
                used = probe.used_memory_mb(i)
                if used > self.t.max_leftover_mb:
                    critical(
                        "leftover_memory",
                        f"{used:.0f} MiB still allocated with no job",
                        Action.CLEAN,
                    )
        if all(r.status is Status.OK for r in results):
            results.append(Result(self.name, Status.OK, f"{count} GPUs healthy"))
        return results
