"""Parts of GPUs as schedulable devices: MIG slices, read from NVML on a real GPU in MIG
mode or taken from the config's declared layouts (`node.gpus.mig`); and the shards or
MPS units of the GPUs the config shares (`node.gpus.sharing`).

A GPU in MIG mode is not scheduled whole: its slices are, each a `GpuInfo` with the
GPU as `parent`, its profile as `type` (1g.10gb) and its `MIG-...` UUID, which is what
CUDA_VISIBLE_DEVICES names. Slices are numbered after the GPUs, so that a GPU index
keeps meaning the same GPU to health checks, Xid lines and device files, and by where
they sit: GPU g's slice at memory slice s is `len(gpus) + 8*g + s` (a node of 2 GPUs
with GPU 0 split as 2g.20gb+1g.10gb+1g.10gb+3g.40gb schedules GPU 1 and slices 2, 4,
5, 6). A slice keeps its number when another GPU is re-split (`podium mig apply`) or
the daemon restarts, so a running job's devices never change meaning under it. The
shards and MPS units come after the slices' room (from `len(gpus) * 9`).

Podium reads layouts; only an administrator's `podium mig apply` changes one.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from podium.api.mig import compute_fraction, model_for, place, slice_counts
from podium.config.cluster import GpuInventory
from podium.node.inventory import GpuInfo, NvmlSeam, from_nvml, nvml_session, nvml_text

NVML_DEVICE_MIG_ENABLE = 1
_PROFILE_RE = re.compile(r"(\d+g\.\d+gb)")
_NAMESPACE = uuid.UUID("6f6a1d52-3c1e-4d8e-9a53-7d0c1f9b0c11")  # declared slices' UUIDs
CAPS_ROOT = Path("/proc/driver/nvidia/capabilities")
SLOTS = 8  # the most memory slices a MIG-capable GPU has: the room each GPU's slices get


def slice_index(gpus: int, parent: int, slot: int) -> int:
    """The device index of the slice at memory slice `slot` of GPU `parent` on a node
    of `gpus` GPUs (stable: it depends on nothing else)."""
    return gpus + SLOTS * parent + slot


def first_shared_index(gpus: int) -> int:
    """The first device index of the shards and MPS units (after the slices' room)."""
    return gpus + SLOTS * gpus


def profile_of(name: str) -> str | None:
    """The MIG profile in an NVML device name ("NVIDIA H100 80GB HBM3 MIG 1g.10gb")."""
    found = _PROFILE_RE.findall(name)
    return found[-1] if found else None


def profile_memory_mb(profile: str) -> int:
    """A profile's memory by its name (1g.10gb: 10240 MiB)."""
    match = re.search(r"\.(\d+)gb$", profile)
    return int(match.group(1)) * 1024 if match else 0


def declared_slices(
    inv: GpuInventory, gpus: list[GpuInfo], only: int | None = None
) -> list[GpuInfo]:
    """The slices the config declares for `gpus` (node.gpus.mig; of GPU `only` when
    given), placed by the model's rules, numbered by GPU and start (slice_index)."""
    model = model_for(inv.type, inv.memory_mb or None)
    if model is None or not inv.mig:
        return []
    by_index = {g.index: g for g in gpus}
    out: list[GpuInfo] = []
    for index in sorted(inv.mig):
        parent = by_index.get(index)
        if parent is None or only not in (None, index):
            continue
        placed = sorted(place(model, inv.mig[index]), key=lambda s: s.start)
        for piece in placed:
            name = piece.profile.name
            out.append(
                GpuInfo(
                    index=slice_index(len(gpus), index, piece.start),
                    type=name,
                    memory_mb=profile_memory_mb(name),
                    uuid="MIG-" + str(uuid.uuid5(_NAMESPACE, f"{parent.uuid}/{piece.start}")),
                    pci=parent.pci,
                    device=parent.device,
                    parent=index,
                    start=piece.start,
                    kind="mig",
                    fraction=piece.profile.compute / slice_counts(model)[1],
                )
            )
    return out


def read_nvml_slices(
    gpus: list[GpuInfo],
    nvml: NvmlSeam | None = None,
    caps_root: Path = CAPS_ROOT,
    only: int | None = None,
) -> list[GpuInfo]:
    """The MIG slices of the GPUs NVML reports in MIG mode (of GPU `only` when given),
    numbered by GPU and start (slice_index; by NVML's slot where a GPU's starts cannot
    all be read); [] when NVML cannot be read or no GPU is in MIG mode."""
    with nvml_session(nvml) as session:
        if session is None:
            return []
        out: list[GpuInfo] = []
        for gpu in gpus:
            if only not in (None, gpu.index):
                continue
            handle = session.nvmlDeviceGetHandleByIndex(gpu.index)
            found = [
                _slice(session, handle, mig, gpu, caps_root)
                for mig in _mig_handles(session, handle)
            ]
            starts = [s.start for s in found]
            by_start = None not in starts and len(set(starts)) == len(starts)
            for slot, s in enumerate(found):
                key = s.start if by_start and s.start is not None else slot
                out.append(replace(s, index=slice_index(len(gpus), gpu.index, key)))
        return out


def _mig_handles(session: Any, handle: Any) -> list[Any]:
    """The handles of a GPU's MIG devices; [] when it is not in MIG mode."""
    try:
        current, _pending = session.nvmlDeviceGetMigMode(handle)
    except Exception:  # NotSupported: a GPU without MIG, or an older driver
        return []
    if current != NVML_DEVICE_MIG_ENABLE:
        return []
    found = []
    for slot in range(int(session.nvmlDeviceGetMaxMigDeviceCount(handle))):
        try:
            found.append(session.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))
        except Exception:  # NotFound: an empty slot
            continue
    return found


def _slice(session: Any, handle: Any, mig: Any, gpu: GpuInfo, caps_root: Path) -> GpuInfo:
    name = nvml_text(session.nvmlDeviceGetName(mig))
    profile = profile_of(name) or "mig"
    gi = _int_or_none(session, "nvmlDeviceGetGpuInstanceId", mig)
    ci = _int_or_none(session, "nvmlDeviceGetComputeInstanceId", mig)
    return GpuInfo(
        index=-1,  # numbered by the caller
        type=profile,
        memory_mb=int(session.nvmlDeviceGetMemoryInfo(mig).total // (1024 * 1024)),
        uuid=nvml_text(session.nvmlDeviceGetUUID(mig)),
        pci=gpu.pci,
        device=gpu.device,
        parent=gpu.index,
        start=_start(session, handle, gi),
        caps=cap_devices(gpu.device, gi, ci, caps_root),
        kind="mig",
        fraction=compute_fraction(profile),
    )


def _int_or_none(session: Any, call: str, *args: Any) -> int | None:
    try:
        return int(getattr(session, call)(*args))
    except Exception:
        return None


def _start(session: Any, handle: Any, gi: int | None) -> int | None:
    """The GPU instance's first memory slice, where the driver tells it."""
    if gi is None:
        return None
    try:
        info = session.nvmlGpuInstanceGetInfo(session.nvmlDeviceGetGpuInstanceById(handle, gi))
        return int(info.placement.start)
    except Exception:  # needs privileges on some drivers
        return None


def cap_devices(
    device: str, gi: int | None, ci: int | None, caps_root: Path = CAPS_ROOT
) -> tuple[str, ...]:
    """The /dev/nvidia-caps files that give access to GPU instance `gi` and its compute
    instance `ci` on the GPU of `device` (/dev/nvidiaN), from the driver's
    capabilities tree ("DeviceFileMinor: N" in each access file); () when unknown."""
    minor = re.search(r"(\d+)$", device)
    if gi is None or minor is None:
        return ()
    base = caps_root / f"gpu{minor.group(1)}" / "mig" / f"gi{gi}"
    files = [base / "access"] + ([base / f"ci{ci}" / "access"] if ci is not None else [])
    out = []
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        found = re.search(r"DeviceFileMinor:\s*(\d+)", text)
        if found:
            out.append(f"/dev/nvidia-caps/nvidia-cap{found.group(1)}")
    return tuple(out)


def resolve_slices(
    inv: GpuInventory, gpus: list[GpuInfo], nvml: NvmlSeam | None = None
) -> list[GpuInfo]:
    """The node's parts of GPUs: MIG slices (the declared layouts for declared GPUs,
    else what NVML reports for the real ones), then the shards and MPS units of the
    GPUs the config shares (`node.gpus.sharing`), numbered after the GPUs."""
    if not gpus:
        return []
    mig = read_nvml_slices(gpus, nvml) if from_nvml(gpus) else declared_slices(inv, gpus)
    split = {s.parent for s in mig}
    shared = [g for g in gpus if g.index not in split]
    return mig + shared_units(inv, shared, first_shared_index(len(gpus)))


def shared_units(inv: GpuInventory, gpus: list[GpuInfo], first: int) -> list[GpuInfo]:
    """One device per shard or MPS unit of each GPU in `node.gpus.sharing`, numbered
    from `first`: a job asking for shard:2 or mps:50 holds that many."""
    out: list[GpuInfo] = []
    for gpu in gpus:
        mode = inv.sharing.get(gpu.index)
        if mode is None:
            continue
        for _ in range(mode.units):
            out.append(
                GpuInfo(
                    index=first + len(out),
                    type=mode.kind,
                    memory_mb=gpu.memory_mb,
                    uuid=gpu.uuid,
                    pci=gpu.pci,
                    device=gpu.device,
                    parent=gpu.index,
                    kind=mode.kind,
                    fraction=1 / mode.units,
                )
            )
    return out


def schedulable(gpus: list[GpuInfo], slices: list[GpuInfo]) -> list[GpuInfo]:
    """What jobs are given: the GPUs not in MIG mode, whole, then the slices."""
    split = {s.parent for s in slices}
    return [g for g in gpus if g.index not in split] + slices


def layouts(slices: list[GpuInfo]) -> dict[int, list[str]]:
    """Each split GPU's profiles, in placement order (the config's `mig` form)."""
    out: dict[int, list[str]] = {}
    for s in slices:
        if s.parent is not None and s.kind == "mig":
            out.setdefault(s.parent, []).append(s.type)
    return out


__all__ = [
    "cap_devices",
    "declared_slices",
    "first_shared_index",
    "layouts",
    "profile_memory_mb",
    "profile_of",
    "read_nvml_slices",
    "resolve_slices",
    "schedulable",
    "shared_units",
    "slice_index",
]
