"""The GPU's links, through the NVML seam: NVLink, the PCIe link, and the NVSwitch fabric.

Thresholds (docs/resiliency.md):
- NVLink: every link the GPU has must be active, and as many as its model has (H100,
  H200, B200, GB200 SXM: 18; A100 SXM: 12; `health.thresholds.<type>.nvlink_links`
  overrides); fewer -> critical, reset (a reset retrains the links; the ladder goes on
  to reboot and replace if it recurs). A GPU with no NVLink (a PCIe card) is skipped.
- PCIe: the link's width below the device's maximum (x8 on an x16 card: a seating or
  riser fault) -> critical, drain. Its generation below the maximum while the GPU is
  busy (>= BUSY_PERCENT utilization) -> warning, recorded against the GPU; an idle GPU
  lowers its generation to save power, so an idle one's generation is not judged.
- Fabric (NVSwitch systems, NVML's GPU fabric info, driver >= 525): registration not
  finished (the fabric manager is not running or still training) -> critical, drain;
  finished with an error -> critical, reboot. Where the GPU has no fabric: skipped.

Each signal is read on its own; one the driver does not support says so (skipped).
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass
from typing import Protocol

from podium.node.health.check_results import Action, Result, Status, skipped
from podium.node.health.gpu import NVML_ERROR_GPU_IS_LOST, NVML_ERROR_NOT_SUPPORTED, NvmlDevices

BUSY_PERCENT = 50
# NVLinks per GPU of the SXM (HGX) forms, by type name (NVML's product names without
# "PCIe" or "NVL"); a GPU whose NVML name has those is held to the links it has.
MODEL_NVLINKS = {"h100": 18, "h200": 18, "b200": 18, "gb200": 18, "a100": 12}
# NVML_GPU_FABRIC_STATE_*
FABRIC_NOT_SUPPORTED, FABRIC_NOT_STARTED, FABRIC_IN_PROGRESS, FABRIC_COMPLETED = 0, 1, 2, 3
MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS (Blackwell); a GPU answers for the links it has


class LinkProbe(Protocol):
    """What the link checks read; the real one wraps pynvml, tests give recordings."""

    def count(self) -> int: ...
    def name(self, index: int) -> str: ...
    def nvlink_states(self, index: int) -> list[bool]: ...  # per link the GPU has: active
    def pcie(self, index: int) -> tuple[int, int, int, int]: ...  # gen, max gen, width, max
    def utilization(self, index: int) -> int: ...  # percent
    def fabric(self, index: int) -> tuple[int, int]: ...  # state, status (0: success)


class NvmlLinkProbe(NvmlDevices):
    """LinkProbe over pynvml, or a recording with the same calls (podium.node.nvml_replay)."""

    def name(self, index: int) -> str:
        name = self.nvml.nvmlDeviceGetName(self._h(index))
        return name.decode() if isinstance(name, bytes) else str(name)

    def nvlink_states(self, index: int) -> list[bool]:
        """Each link's state, link 0 up, until NVML says the GPU has no such link
        (NotSupported, InvalidArgument). A GPU with no NVLink raises on link 0."""
        handle, states = self._h(index), []
        for link in range(MAX_LINKS):
            try:
                states.append(int(self.nvml.nvmlDeviceGetNvLinkState(handle, link)) == 1)
            except Exception:
                if link == 0:
                    raise
                break
        return states

    def pcie(self, index: int) -> tuple[int, int, int, int]:
        n, handle = self.nvml, self._h(index)
        most = getattr(n, "nvmlDeviceGetGpuMaxPcieLinkGeneration", None)  # the GPU's own
        return (
            int(n.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            int((most or n.nvmlDeviceGetMaxPcieLinkGeneration)(handle)),
            int(n.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            int(n.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        )

    def utilization(self, index: int) -> int:
        return int(self.nvml.nvmlDeviceGetUtilizationRates(self._h(index)).gpu)

    def fabric(self, index: int) -> tuple[int, int]:
        info = self.nvml.c_nvmlGpuFabricInfo_t()
        self.nvml.nvmlDeviceGetGpuFabricInfo(self._h(index), ctypes.byref(info))
        return int(info.state), int(info.status)


@dataclass(frozen=True)
class LinkExpectations:
    """What the links must be: `nvlinks` per GPU (None: the model's, else all it has)."""

    gpu_type: str = ""
    nvlinks: int | None = None


class LinkChecks:
    """NVLink, PCIe and fabric of every GPU, in one pass (a quick check)."""

    name = "links"
    deep = False

    def __init__(self, probe: LinkProbe | None, expect: LinkExpectations) -> None:
        self.probe = probe
        self.expect = expect

    def run(self) -> list[Result]:
        probe = self.probe
        if probe is None:
            return [Result(self.name, Status.UNKNOWN, "NVML cannot be read on this machine")]
        results: list[Result] = []
        for i in range(probe.count()):
            results += self._nvlink(probe, i)
            results += self._pcie(probe, i)
            results += self._fabric(probe, i)
        return results

    def expected_links(self, name: str, found: int) -> int:
        """The NVLinks a GPU named `name` must have up: the configured count, else its
        model's for an SXM part ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"),
        else every link NVML lists for it (a PCIe or NVL card, an unknown model)."""
        if self.expect.nvlinks is not None:
            return self.expect.nvlinks
        words = re.split(r"[ -]+", name.lower().removeprefix("nvidia").strip())
        if "pcie" in words or "nvl" in words or not words:
            return found
        return MODEL_NVLINKS.get(words[0], found)

    def _nvlink(self, probe: LinkProbe, i: int) -> list[Result]:
        try:
            states = probe.nvlink_states(i)
            name = probe.name(i)
        except Exception as exc:
            return [_unreadable("nvlink", i, exc, "no NVLink (a PCIe card)")]
        up, want = sum(states), self.expected_links(name, len(states))
        down = [link for link, active in enumerate(states) if not active]
        details = {"active": up, "links": len(states), "expected": want, "down": down}
        if up < want:
            where = f" (down: {', '.join(map(str, down))})" if down else ""
            return [
                Result(
                    "nvlink",
                    Status.CRITICAL,
                    f"GPU {i}: {up} of {want} NVLinks active{where}",
                    Action.RESET,
                    i,
                    details=details,
                )
            ]
        return [
            Result("nvlink", Status.OK, f"GPU {i}: {up} NVLinks active", gpu=i, details=details)
        ]

    def _pcie(self, probe: LinkProbe, i: int) -> list[Result]:
        try:
            gen, max_gen, width, max_width = probe.pcie(i)
        except Exception as exc:
            return [_unreadable("pcie", i, exc, "the PCIe link cannot be read")]
        details = {"gen": gen, "max_gen": max_gen, "width": width, "max_width": max_width}
        link = f"Gen{gen} x{width} (the device's most: Gen{max_gen} x{max_width})"
        if width < max_width:
            return [
                Result(
                    "pcie",
                    Status.CRITICAL,
                    f"GPU {i}: PCIe link at {link}: fewer lanes than the device has",
                    Action.DRAIN,
                    i,
                    details=details,
                )
            ]
        if gen < max_gen:
            try:
                busy = probe.utilization(i)
            except Exception:
                busy = 0
            details["utilization"] = busy
            if busy >= BUSY_PERCENT:
                return [
                    Result(
                        "pcie",
                        Status.WARNING,
                        f"GPU {i}: PCIe link at {link} while {busy}% busy",
                        Action.RECORD,
                        i,
                        details=details,
                    )
                ]
            return [
                Result(
                    "pcie",
                    Status.OK,
                    f"GPU {i}: PCIe Gen{gen} x{width} (idle: the generation is lowered to "
                    "save power, judged under load)",
                    gpu=i,
                    details=details,
                )
            ]
        return [Result("pcie", Status.OK, f"GPU {i}: PCIe {link}", gpu=i, details=details)]

    def _fabric(self, probe: LinkProbe, i: int) -> list[Result]:
        try:
            state, status = probe.fabric(i)
        except Exception as exc:
            return [_unreadable("fabric", i, exc, "no NVSwitch fabric (or a driver before 525)")]
        if state == FABRIC_NOT_SUPPORTED:
            return [skipped("fabric", f"GPU {i}: no NVSwitch fabric", i)]
        if state in (FABRIC_NOT_STARTED, FABRIC_IN_PROGRESS):
            what = "has not started" if state == FABRIC_NOT_STARTED else "is still in progress"
            return [
                Result(
                    "fabric",
                    Status.CRITICAL,
                    f"GPU {i}: NVSwitch fabric registration {what} (is nvidia-fabricmanager "
                    "running?): CUDA cannot start on it",
                    Action.DRAIN,
                    i,
                    details={"state": state},
                )
            ]
        if status != 0:
            return [
                Result(
                    "fabric",
                    Status.CRITICAL,
                    f"GPU {i}: NVSwitch fabric registration failed (NVML status {status})",
                    Action.REBOOT,
                    i,
                    details={"state": state, "status": status},
                )
            ]
        return [Result("fabric", Status.OK, f"GPU {i}: NVSwitch fabric registered", gpu=i)]


def _unreadable(check: str, gpu: int, exc: Exception, unsupported: str) -> Result:
    """A signal that could not be read: not supported (skipped, saying what that
    means here), the GPU lost (critical), or unknown for this signal alone."""
    kind = type(exc).__name__
    if kind.endswith("NotSupported") or getattr(exc, "value", None) == NVML_ERROR_NOT_SUPPORTED:
        return skipped(check, f"GPU {gpu}: {unsupported}", gpu)
    if kind.endswith("GpuIsLost") or getattr(exc, "value", None) == NVML_ERROR_GPU_IS_LOST:
        return Result(check, Status.CRITICAL, f"GPU {gpu}: NVML says the GPU is lost",
                      Action.REBOOT, gpu)  # fmt: skip
    return Result(check, Status.UNKNOWN, f"GPU {gpu}: cannot read it: {exc}", gpu=gpu)


__all__ = [
    "BUSY_PERCENT",
    "MODEL_NVLINKS",
    "LinkChecks",
    "LinkExpectations",
    "LinkProbe",
    "NvmlLinkProbe",
]
