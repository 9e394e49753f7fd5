"""GPU checks through the NVML seam: count, ECC, retired pages, row remapping,
temperature, throttle reasons, the driver's recovery action, and memory left allocated
after a job.

Thresholds (DESIGN.md): count != expected -> reboot (replace if it recurs); uncorrected
volatile ECC > 0 -> drain; retired pages > 10 -> drain; row remap pending -> reset,
failed -> replace; temperature > 84 C -> drain; a process on a GPU no job holds -> clean (the driver
reserves memory on an idle GPU, so the used figure alone cannot tell);
NVML recovery action reset/reboot/drain -> that; hardware or thermal throttling ->
warning, recorded against the GPU.
Each signal is read on its own: one the driver does not support (retired pages on
Hopper) says so and the others still judge; NVML's "GPU is lost" is critical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from podium.node.health.check_results import Action, Result, Status


class GpuProbe(Protocol):
    """What the GPU checks read. The real one wraps pynvml; tests give recorded values."""

    def count(self) -> int: ...
    def ecc_uncorrected_volatile(self, index: int) -> int: ...
    def retired_pages(self, index: int) -> int: ...
    def row_remap(self, index: int) -> tuple[bool, bool]: ...  # (pending, failed)
    def temperature_c(self, index: int) -> int: ...
    def compute_processes(self, index: int) -> list[tuple[int, float | None]]: ...  # pid, MiB
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


class NvmlDevices:
    """NVML opened for a probe: pynvml, or the recording $PODIUM_NVML_REPLAY names
    (podium.node.nvml_replay); each GPU's handle by index, and their count."""

    def __init__(self, nvml: Any = None) -> None:
        if nvml is None:
            from podium.node.nvml_replay import load_nvml

            nvml = load_nvml()
        self.nvml = nvml
        nvml.nvmlInit()

    def _h(self, index: int) -> Any:
        return self.nvml.nvmlDeviceGetHandleByIndex(index)

    def count(self) -> int:
        return int(self.nvml.nvmlDeviceGetCount())


class NvmlProbe(NvmlDevices):
    """GpuProbe over pynvml (opened per call; cheap next to the check interval)."""

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

    def compute_processes(self, index: int) -> list[tuple[int, float | None]]:
        """The processes holding memory on the GPU (compute and graphics contexts)."""
        n = self.nvml
        found: dict[int, float | None] = {}
        getters = [
            getattr(n, "nvmlDeviceGetComputeRunningProcesses", None),
            getattr(n, "nvmlDeviceGetGraphicsRunningProcesses", None),
        ]
        for getter in [g for g in getters if g is not None]:
            for proc in getter(self._h(index)):
                used = getattr(proc, "usedGpuMemory", None)
                found[int(proc.pid)] = None if used is None else float(used) / (1024 * 1024)
        return sorted(found.items())

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
            return [Result(self.name, Status.UNKNOWN, "NVML cannot be read on this machine")]
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
            results += self._judge(probe, i)
        if all(r.status is Status.OK for r in results):
            results.append(Result(self.name, Status.OK, f"{count} GPUs healthy"))
        return results

    def _judge(self, probe: GpuProbe, i: int) -> list[Result]:
        """Every signal of GPU `i`, each read and judged on its own: one the driver does
        not support reports itself so, and the others still judge."""
        results: list[Result] = []

        def critical(check: str, reason: str, action: Action) -> None:
            results.append(Result(check, Status.CRITICAL, f"GPU {i}: {reason}", action, i))

        def read(check: str, getter: Callable[[int], T]) -> T | None:
            try:
                return getter(i)
            except Exception as exc:
                results.append(_unreadable(check, i, exc))
                return None

        ecc = read("ecc", probe.ecc_uncorrected_volatile)
        if ecc:
            critical("ecc", f"{ecc} uncorrected volatile ECC errors", Action.DRAIN)
        pages = read("retired_pages", probe.retired_pages)
        if pages is not None and pages > self.t.max_retired_pages:
            critical(
                "retired_pages",
                f"{pages} retired pages (> {self.t.max_retired_pages})",
                Action.DRAIN,
            )
        remap = read("row_remap", probe.row_remap)
        if remap is not None and remap[1]:
            critical("row_remap", "row remap failed", Action.REPLACE)
        elif remap is not None and remap[0]:
            critical("row_remap", "row remap pending (reset needed)", Action.RESET)
        temp = read("temperature", probe.temperature_c)
        if temp is not None and temp > self.t.max_temperature_c:
            critical("temperature", f"{temp} C (> {self.t.max_temperature_c} C)", Action.DRAIN)
        recovery = read("recovery_action", probe.recovery_action)
        if recovery in RECOVERY_ACTIONS:
            what, action = RECOVERY_ACTIONS[recovery]
            critical("recovery_action", f"the driver asks for {what}", action)
        reasons = read("throttle", probe.throttle_reasons)
        slow = [name for bit, name in THROTTLE_NAMES.items() if (reasons or 0) & bit]
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
            self._leftovers(probe, i, results)
        return results

    def _leftovers(self, probe: GpuProbe, i: int, results: list[Result]) -> None:
        """An idle GPU must hold no process: the driver reserves memory on a healthy idle
        GPU (480 MiB on an H100), so the used figure alone cannot tell."""
        try:
            procs = probe.compute_processes(i)
        except Exception as exc:
            results.append(_unreadable("leftover_memory", i, exc))
            return
        if not procs:
            return
        shown = ", ".join(
            f"pid {pid} ({process_name(pid)}{'' if mb is None else f', {mb:.0f} MiB'})"
            for pid, mb in procs[:5]
        )
        results.append(
            Result(
                "leftover_memory",
                Status.CRITICAL,
                f"GPU {i}: {len(procs)} process(es) hold it with no job: {shown}",
                Action.CLEAN,
                i,
                details={"pids": [pid for pid, _ in procs]},
            )
        )


T = TypeVar("T")

# NVML return codes (nvmlReturn_t) that say something about the GPU itself.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_GPU_IS_LOST = 15


def _unreadable(check: str, gpu: int, exc: Exception) -> Result:
    """The result for a signal that could not be read: not supported (fine, said so),
    GPU lost (critical: it has fallen off the bus), or unknown for this signal alone."""
    code = getattr(exc, "value", None)
    if code == NVML_ERROR_NOT_SUPPORTED or type(exc).__name__.endswith("NotSupported"):
        return Result(
            check,
            Status.OK,
            f"GPU {gpu}: not supported by this GPU or driver",
            gpu=gpu,
            details={"supported": False},
        )
    if code == NVML_ERROR_GPU_IS_LOST or type(exc).__name__.endswith("GpuIsLost"):
        return Result(
            check, Status.CRITICAL, f"GPU {gpu}: NVML says the GPU is lost", Action.REBOOT, gpu
        )
    return Result(check, Status.UNKNOWN, f"GPU {gpu}: cannot read: {exc}", gpu=gpu)


def process_name(pid: int) -> str:
    """A process's command name, or "?" when it is gone or in another pid namespace."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip() or "?"
    except OSError:
        return "?"
