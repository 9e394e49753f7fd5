"""A container's GPUs, as enroot's nvidia hook (libnvidia-container) gives them, done
in the task's own mount namespace before chroot (podium.run.containers.lifecycle.enter):

- the job's GPUs that NVIDIA_VISIBLE_DEVICES names (all of them when it is unset:
  the devices are the job's either way) as device nodes, with the NVIDIA control
  nodes;
- the other GPUs' entries in /proc/driver/nvidia/gpus hidden under an empty tmpfs, so
  that NVML and CUDA inside enumerate exactly the container's GPUs (nvidia-smi -L
  lists them alone); the cgroup device filter still refuses the others, so this is
  the view, not the fence;
- CUDA_VISIBLE_DEVICES renumbered to what CUDA enumerates inside (0..n-1, in the
  host's order), as Slurm numbers GPUs inside a device-constrained job;
- the driver's libraries and tools of the capabilities asked (NVIDIA_DRIVER_CAPABILITIES)
  bound read-only under /usr/local/nvidia, on PATH and LD_LIBRARY_PATH.

Standard library only.
"""

from __future__ import annotations

import os

from podium.run.containers import nvidia
from podium.run.containers.mounts import (
    MS_BIND,
    MS_NODEV,
    MS_NOSUID,
    MS_RDONLY,
    ContainerError,
    mount,
    point,
    remount_readonly,
)

NVIDIA_CONTROL = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
PROC_GPUS = "/proc/driver/nvidia/gpus"


def give_gpus(
    target: str, gpus: list[dict[str, object]], driver_files: list[str], env: dict[str, str]
) -> dict[str, str]:
    """Give the container under `target` its GPUs (the job's: [{"index", "uuid",
    "device"}]) and the driver's `driver_files` as `env` (the job's and the image's
    environment) asks; return the environment to run with. Raises ContainerError
    on a capability that does not exist."""
    try:
        request = nvidia.Request.of(env)
    except nvidia.DriverError as exc:
        raise ContainerError(str(exc)) from None
    visible = request.devices_of(gpus)
    if gpus:
        for node in [f"/dev/{n}" for n in NVIDIA_CONTROL]:
            if os.path.exists(node):
                mount(node, point(target, node, False), None, MS_BIND)
    for gpu in visible:
        device = str(gpu["device"])
        if os.path.exists(device):
            mount(device, point(target, device, False), None, MS_BIND)
    _hide_others(target, [str(g["device"]) for g in visible])
    env = dict(env)
    if gpus and "CUDA_VISIBLE_DEVICES" in env and not env.get("PODIUM_GPUS_HIDDEN"):
        env["CUDA_VISIBLE_DEVICES"] = renumbered(env["CUDA_VISIBLE_DEVICES"], visible)
    files = request.files(driver_files)
    if files:
        _bind_driver(target, files, env)
    return env


def renumbered(cuda_visible: str, visible: list[dict[str, object]]) -> str:
    """The task's CUDA_VISIBLE_DEVICES (host indices) as CUDA numbers the GPUs inside
    the container (their places among the `visible` ones, in index order); a GPU the
    container does not show is left out; a UUID (a MIG slice, an MPS GPU) stays as it is."""
    order = sorted(int(str(g["index"])) for g in visible)
    places = {index: place for place, index in enumerate(order)}
    kept = []
    for item in cuda_visible.split(","):
        item = item.strip()
        if item.isdigit() and int(item) in places:
            kept.append(str(places[int(item)]))
        elif item.startswith(("MIG-", "GPU-")):  # a slice, an MPS GPU: by UUID inside too
            kept.append(item)
    return ",".join(kept)


def hidden_entries(proc_gpus: str, visible_minors: set[int]) -> list[str]:
    """The entries (PCI bus ids) of `proc_gpus` whose GPU's device minor is not one of
    `visible_minors` (read from each entry's information file; an entry that cannot be
    read is hidden)."""
    try:
        entries = sorted(os.listdir(proc_gpus))
    except OSError:
        return []
    hidden = []
    for entry in entries:
        minor = None
        try:
            with open(os.path.join(proc_gpus, entry, "information")) as fh:
                for line in fh:
                    key, _, value = line.partition(":")
                    if key.strip() == "Device Minor" and value.strip().isdigit():
                        minor = int(value.strip())
        except OSError:
            pass
        if minor not in visible_minors:
            hidden.append(entry)
    return hidden


def _minor(device: str) -> int | None:
    try:
        return os.minor(os.stat(device).st_rdev)
    except OSError:
        return None


def _hide_others(target: str, devices: list[str]) -> None:
    """Cover the other GPUs' /proc/driver/nvidia/gpus entries with an empty read-only
    tmpfs, as libnvidia-container does. Best effort: where the kernel refuses, the
    device filter still fences them and only the view is wider."""
    minors = {m for m in (_minor(d) for d in devices) if m is not None}
    for entry in hidden_entries(PROC_GPUS, minors):
        try:
            mount("tmpfs", f"{target}{PROC_GPUS}/{entry}", "tmpfs", MS_RDONLY | MS_NOSUID, "size=0")
        except ContainerError:
            continue


def _bind_driver(target: str, files: list[str], env: dict[str, str]) -> None:
    """Mount the driver's `files` read-only under /usr/local/nvidia in the container
    (a tmpfs there holds them and their names, so the image is not changed) and put
    its directories on PATH and LD_LIBRARY_PATH (podium.run.containers.nvidia.layout)."""
    binds, links = nvidia.layout(files)
    top = point(target, "/usr/local/nvidia", True)
    mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755")
    for sub in ("lib64", "bin"):
        os.mkdir(f"{top}/{sub}", 0o755)
    for host, inside in binds:
        where = target + inside
        os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
        mount(host, where, None, MS_BIND)
        remount_readonly(where, MS_NOSUID)
    for link, name in links:
        os.symlink(name, target + link)
    for var, directory in (("PATH", nvidia.BIN_DIR), ("LD_LIBRARY_PATH", nvidia.LIB_DIR)):
        parts = [p for p in env.get(var, "").split(":") if p]
        if directory not in parts:
            parts = [*parts, directory] if var == "PATH" else [directory, *parts]
        env[var] = ":".join(parts)


__all__ = ["NVIDIA_CONTROL", "give_gpus", "hidden_entries", "renumbered"]
