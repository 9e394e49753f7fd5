"""The host's NVIDIA driver inside a container, the way enroot's nvidia hook (and
libnvidia-container behind it) gives it: only when the container's environment sets
NVIDIA_VISIBLE_DEVICES (not "void"), with the driver's user-space files chosen by
NVIDIA_DRIVER_CAPABILITIES (default "utility"), and the GPUs it names among the job's.

- `driver_files()` finds the driver's libraries (`ldconfig -p`) and tools (PATH) on
  this host; declared GPUs declare theirs (`node.gpus.driver_files`).
- `Request.of(env)` reads the two variables (raising ContainerError on a capability
  that does not exist); `Request.files(...)` and `Request.devices(...)` choose.

The files are mounted read-only under /usr/local/nvidia (lib64, bin) in the container,
where CUDA images already look (their LD_LIBRARY_PATH), and PATH and LD_LIBRARY_PATH
gain those directories. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

CAPABILITIES = ("compute", "compat32", "display", "graphics", "utility", "video")
# library name prefixes and tools of each capability (libnvidia-container's lists, trimmed
# to what a Linux container needs; compat32's 32-bit libraries are not looked for)
LIBRARIES = {
    "utility": ("libnvidia-ml.so", "libnvidia-cfg.so"),
    "compute": (
        "libcuda.so", "libcudadebugger.so", "libnvidia-opencl.so", "libnvidia-ptxjitcompiler.so",
        "libnvidia-fatbinaryloader.so", "libnvidia-allocator.so", "libnvidia-compiler.so",
        "libnvidia-nvvm.so", "libnvidia-gpucomp.so",
    ),
    "video": (
        "libvdpau_nvidia.so", "libnvidia-encode.so", "libnvidia-opticalflow.so", "libnvcuvid.so",
    ),
    "graphics": (
        "libnvidia-eglcore.so", "libnvidia-glcore.so", "libnvidia-tls.so", "libnvidia-glsi.so",
        "libnvidia-rtcore.so", "libnvoptix.so", "libGLX_nvidia.so", "libEGL_nvidia.so",
        "libGLESv2_nvidia.so", "libGLESv1_CM_nvidia.so", "libnvidia-glvkspirv.so",
    ),
    "display": ("libnvidia-fbc.so", "libnvidia-ifr.so"),
}  # fmt: skip
TOOLS = {
    "utility": ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced"),
    "compute": ("nvidia-cuda-mps-control", "nvidia-cuda-mps-server"),
}
ALL_TOOLS = frozenset(t for tools in TOOLS.values() for t in tools)
ARCH_FLAGS = {"x86_64": "x86-64", "aarch64": "AArch64"}  # ldconfig -p's word for each
LIB_DIR = "/usr/local/nvidia/lib64"
BIN_DIR = "/usr/local/nvidia/bin"


class DriverError(ValueError):
    """The container's NVIDIA settings cannot be honoured (one line)."""


def driver_files(ldconfig: str | None = None, machine: str | None = None) -> list[str]:
    """The NVIDIA driver's libraries this host's linker knows (`ldconfig -p`; its
    text as `ldconfig` when given) for this machine's architecture (`machine` as
    uname names it; x86-64 or AArch64 libraries, not the 32-bit ones) and its tools
    on PATH: absolute paths. Empty without a driver."""
    arch = ARCH_FLAGS.get(machine or os.uname().machine)
    if ldconfig is None:
        program = shutil.which("ldconfig") or "/sbin/ldconfig"
        try:
            ldconfig = subprocess.run(
                [program, "-p"], capture_output=True, text=True, timeout=10, check=False
            ).stdout
        except (OSError, subprocess.SubprocessError):
            ldconfig = ""
    wanted = tuple(p for names in LIBRARIES.values() for p in names)
    found: list[str] = []
    for line in ldconfig.splitlines():
        name, _, rest = line.strip().partition(" (")
        flags, _, path = rest.partition(") => ")
        if not name.startswith(wanted) or (arch and arch not in flags.split(",")):
            continue
        if path.startswith("/") and path not in found:
            found.append(path)
    for tools in TOOLS.values():
        for tool in tools:
            where = shutil.which(tool, path="/usr/bin:/usr/sbin:/bin:/sbin:/usr/local/bin")
            if where:
                found.append(where)
    return found


def _capability_of(path: str) -> str | None:
    name = os.path.basename(path)
    for cap, prefixes in LIBRARIES.items():
        if name.startswith(prefixes):
            return cap
    for cap, tools in TOOLS.items():
        if name in tools:
            return cap
    return None


@dataclass(frozen=True)
class Request:
    """What a container's environment asks of the driver: `devices` is None
    (NVIDIA_VISIBLE_DEVICES unset or "void": no driver at all), "all", "none" or a list
    of GPU indices and UUIDs; `capabilities` the capabilities asked."""

    devices: str | tuple[str, ...] | None
    capabilities: frozenset[str]

    @classmethod
    def of(cls, env: dict[str, str]) -> Request:
        """The request in `env`; raises DriverError on a capability that does not
        exist (as enroot's hook refuses it)."""
        visible = env.get("NVIDIA_VISIBLE_DEVICES", "void").strip()
        if visible in ("", "void"):
            return cls(None, frozenset())
        caps: set[str] = set()
        for cap in (env.get("NVIDIA_DRIVER_CAPABILITIES") or "utility").split(","):
            cap = cap.strip()
            if cap == "all":
                caps = set(CAPABILITIES)
                break
            if cap not in CAPABILITIES:
                raise DriverError(
                    f"NVIDIA_DRIVER_CAPABILITIES: unknown capability {cap!r} "
                    f"(expected all or some of {', '.join(CAPABILITIES)})"
                )
            caps.add(cap)
        if visible in ("all", "none"):
            return cls(visible, frozenset(caps))
        return cls(tuple(v.strip() for v in visible.split(",") if v.strip()), frozenset(caps))

    def files(self, available: list[str]) -> list[str]:
        """The driver files to mount: those of the capabilities asked."""
        if self.devices is None:
            return []
        return [f for f in available if _capability_of(f) in self.capabilities]

    def devices_of(self, gpus: list[dict[str, object]]) -> list[dict[str, object]]:
        """The job's GPUs (each {"index", "uuid", "device"}) the container sees: all of
        them without a driver request or with "all", none with "none", else those named
        by index or UUID (never one the job was not given)."""
        if self.devices is None or self.devices == "all":
            return gpus
        if self.devices == "none":
            return []
        named = set(self.devices)
        return [g for g in gpus if str(g.get("index")) in named or str(g.get("uuid")) in named]


def layout(files: list[str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Where each driver file goes in the container, and the links that name them:
    (binds [(host file, container path)], links [(container path, target)]). A
    library is bound under its real file's name; each name the host gives it (its
    soname link, the .so link) becomes a link to that."""
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    seen: set[str] = set()
    for path in files:
        directory = BIN_DIR if os.path.basename(path) in ALL_TOOLS else LIB_DIR
        real = os.path.realpath(path)
        name = os.path.basename(real)
        target = f"{directory}/{name}"
        if target not in seen and os.path.isfile(real):
            seen.add(target)
            binds.append((real, target))
        alias = f"{directory}/{os.path.basename(path)}"
        if alias != target and alias not in seen:
            seen.add(alias)
            links.append((alias, name))
        if directory == LIB_DIR and ".so." in name:
            plain = f"{directory}/{name.split('.so.')[0]}.so"
            if plain not in seen:
                seen.add(plain)
                links.append((plain, os.path.basename(path)))
    return binds, links


__all__ = [
    "BIN_DIR",
    "CAPABILITIES",
    "LIB_DIR",
    "DriverError",
    "Request",
    "driver_files",
    "layout",
]
