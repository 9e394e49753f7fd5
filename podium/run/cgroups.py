"""Job cgroups: what a job asked for is enforced, as Slurm's cgroup plugins do.

Two layouts are supported, as they exist on machines today:
- cgroup v2 (unified): one group per job under the daemon's jobs base; memory.max and
  memory.swap.max, cpuset.cpus, and an eBPF device program (`bpfdev`). cgroup.kill
  ends the whole job at once.
- cgroup v1 or hybrid (v1 controllers at /sys/fs/cgroup/{memory,cpuset,devices}, maybe
  an empty v2 at /sys/fs/cgroup/unified): one group per job in each v1 hierarchy;
  memory.limit_in_bytes (and memsw), cpuset.cpus/mems, devices.deny. A v2 group is
  still made where v2 is mounted, for tracking and cgroup.kill.

Each limit is applied where its controller is present and writable; `enforcement()`
says, per resource, whether it is enforced and by what, or only accounted and why.
Standard library only (the supervisor imports this at every job start).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from podium.run.bpfdev import BpfError, Device, deny_devices

V1_CONTROLLERS = ("memory", "cpuset", "devices")


class Layout(NamedTuple):
    """Where the cgroup hierarchies are mounted and where this process sits in each.
    (NamedTuples here, not dataclasses: the supervisor imports this at every job start.)"""

    v2: Path | None = None
    own_v2: str = "/"
    v1: dict[str, Path] = {}
    own_v1: dict[str, str] = {}

    def v2_controllers(self, base: str) -> set[str]:
        """The controllers enabled for children of `base` in the v2 hierarchy."""
        if self.v2 is None:
            return set()
        try:
            text = (self.v2 / base.lstrip("/") / "cgroup.subtree_control").read_text()
        except OSError:
            return set()
        return set(text.split())


def parse_layout(mounts: str, own: str) -> Layout:
    """The layout from /proc/self/mounts and /proc/self/cgroup text (pure)."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2" and v2 is None:
            v2 = Path(parts[1])
        elif parts[2] == "cgroup":
            options = parts[3].split(",")
            for controller in V1_CONTROLLERS:
                if controller in options:
                    v1.setdefault(controller, Path(parts[1]))
    own_v2 = "/"
    own_v1: dict[str, str] = {}
    for line in own.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "":
            own_v2 = path or "/"
        for controller in controllers.split(","):
            if controller in V1_CONTROLLERS:
                own_v1[controller] = path or "/"
    return Layout(v2, own_v2, v1, own_v1)


def current_layout() -> Layout:
    """This process's layout; an empty one where /proc cannot be read."""
    try:
        with open("/proc/self/mounts") as fh:
            mounts = fh.read()
        with open("/proc/self/cgroup") as fh:
            own = fh.read()
    except OSError:
        return Layout()
    return parse_layout(mounts, own)


class Limits(NamedTuple):
    """What a job may use: memory (MiB), CPU ids, and devices it must not open."""

    mem_mb: int | None = None
    cpu_ids: tuple[int, ...] = ()
    deny_devices: tuple[Device, ...] = ()


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _cpu_list(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


class JobCgroups:
    """The cgroups of one job, made and limited at construction (as root).

    `paths` lists every group made (the v2 one first); `enforced` names, per resource,
    the mechanism that enforces it. Failures to apply a limit leave it unenforced
    (recorded in `problems`), never fail the job: `enforcement()` reports the machine's
    capability up front.
    """

    def __init__(self, name: str, layout: Layout, limits: Limits, v2_base: str | None) -> None:
        self.layout = layout
        self.paths: list[Path] = []
        self.v2: Path | None = None
        self.v1: dict[str, Path] = {}
        self.enforced: dict[str, str] = {}
        self.problems: list[str] = []
        if os.geteuid() != 0:
            return
        if layout.v2 is not None:
            base = v2_base or layout.own_v2
            path = layout.v2 / base.lstrip("/") / name
            if self._mkdir(path):
                self.v2 = path
                self._limit_v2(path, layout.v2_controllers(base), limits)
        for controller, mount in layout.v1.items():
            if controller == "memory" and limits.mem_mb is None:
                continue
            if controller == "cpuset" and not limits.cpu_ids:
                continue
            if controller == "devices" and not limits.deny_devices:
                continue
            if controller in self.enforced:
                continue  # v2 already enforces it
            parent = mount / layout.own_v1.get(controller, "/").lstrip("/")
            path = parent / name
            if self._mkdir(path):
                self.v1[controller] = path
                self._limit_v1(controller, parent, path, limits)

    def _mkdir(self, path: Path) -> bool:
        try:
            path.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            self.problems.append(f"{path}: {exc.strerror}")
            return False
        if not os.access(path / "cgroup.procs", os.W_OK):
            with contextlib.suppress(OSError):
                path.rmdir()
            return False
        self.paths.append(path)
        return True

    def _try(self, resource: str, how: str, *writes: tuple[Path, str]) -> None:
        try:
            for path, value in writes:
                _write(path, value)
        except OSError as exc:
            self.problems.append(f"{resource}: {writes[0][0]}: {exc.strerror}")
            return
        self.enforced[resource] = how

    def _limit_v2(self, path: Path, controllers: set[str], limits: Limits) -> None:
        if limits.mem_mb is not None and "memory" in controllers:
            writes = [(path / "memory.max", str(limits.mem_mb * 2**20))]
            if (path / "memory.swap.max").exists():
                writes.append((path / "memory.swap.max", "0"))
            self._try("memory", "cgroup v2 memory.max", *writes)
        if limits.cpu_ids and "cpuset" in controllers:
            self._try("cpus", "cgroup v2 cpuset", (path / "cpuset.cpus", _cpu_list(limits.cpu_ids)))
        if limits.deny_devices:
            try:
                deny_devices(path, limits.deny_devices)
                self.enforced["devices"] = "cgroup v2 device program (eBPF)"
            except BpfError as exc:
                self.problems.append(f"devices: {exc}")

    def _limit_v1(self, controller: str, parent: Path, path: Path, limits: Limits) -> None:
        if controller == "memory" and limits.mem_mb is not None:
            size = str(limits.mem_mb * 2**20)
            writes = [(path / "memory.limit_in_bytes", size)]
            if (path / "memory.memsw.limit_in_bytes").exists():
                writes.append((path / "memory.memsw.limit_in_bytes", size))  # no swap either
            self._try("memory", "cgroup v1 memory", *writes)
        elif controller == "cpuset":
            try:
                mems = (parent / "cpuset.mems").read_text().strip()
            except OSError:
                mems = "0"
            self._try(
                "cpus",
                "cgroup v1 cpuset",
                (path / "cpuset.mems", mems),
                (path / "cpuset.cpus", _cpu_list(limits.cpu_ids)),
            )
        elif controller == "devices":
            self._try(
                "devices",
                "cgroup v1 devices",
                *((path / "devices.deny", f"{kind} {major}:{minor} rwm")
                  for kind, major, minor in limits.deny_devices),
            )  # fmt: skip

    @property
    def procs_files(self) -> list[str]:
        """The files a task writes "0" to, to join every group of the job."""
        return [str(p / "cgroup.procs") for p in self.paths]

    def pids(self) -> set[int]:
        """Every process in any of the job's groups."""
        found: set[int] = set()
        for path in self.paths:
            found |= read_pids(path)
        return found

    def kill(self) -> None:
        """cgroup.kill where the kernel has it (v2, 5.14+): the whole job at once."""
        if self.v2 is not None and (self.v2 / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                _write(self.v2 / "cgroup.kill", "1")

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended for this job's memory limit."""
        return sum(oom_kills(p) for p in ([self.v2] if self.v2 else []) + list(self.v1.values()))

    def remove(self) -> None:
        """Remove the (empty) groups, deepest first; what will not go is left."""
        for path in reversed(self.paths):
            with contextlib.suppress(OSError):
                path.rmdir()


def read_pids(group: Path) -> set[int]:
    try:
        return {int(p) for p in (group / "cgroup.procs").read_text().split()}
    except (OSError, ValueError):
        return set()


def oom_kills(group: Path) -> int:
    """The oom_kill count of a group: memory.events (v2) or memory.oom_control (v1)."""
    for name in ("memory.events", "memory.oom_control"):
        try:
            text = (group / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


def prepare_v2_base(layout: Layout) -> str | None:
    """Make the v2 controllers (memory, cpuset) usable for job groups; return the group
    jobs go under, or None to leave the default (the supervisor's own group).

    cgroup v2 lets a group enable controllers for its children only while it holds no
    process itself (except the root). So when the daemon sits in a non-root group whose
    controllers are not yet enabled, it moves itself into a leaf `podium-daemon` and
    enables them on its former group, which becomes the jobs' base (what systemd's
    Delegate=yes permits). Root only; anything refused leaves things as they were.
    """
    if layout.v2 is None or os.geteuid() != 0:
        return None
    base = layout.v2 / layout.own_v2.lstrip("/")
    try:
        available = set((base / "cgroup.controllers").read_text().split())
        enabled = set((base / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    wanted = {"memory", "cpuset"} & available
    if not wanted - enabled:
        return None
    try:
        if layout.own_v2 != "/":
            leaf = base / "podium-daemon"
            leaf.mkdir(exist_ok=True)
            _write(leaf / "cgroup.procs", str(os.getpid()))
        _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(wanted)))
    except OSError:
        return None
    return layout.own_v2


def _device_programs_work(parent: Path) -> bool:
    """Whether the kernel takes a device program on a v2 group here (tried on a group
    made for the purpose and removed at once)."""
    probe = parent / f"podium-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        deny_devices(probe, [])
        return True
    except BpfError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def enforcement(
    layout: Layout, root: bool, v2_base: str | None, cpus_known: bool, devices_known: bool
) -> dict[str, str]:
    """Per resource (memory, cpus, devices, processes): "enforced: HOW" or
    "accounted only: WHY", for `podium nodes` and the logs. Reads the hierarchy; makes
    nothing."""
    if not root:
        why = "accounted only: the daemon is not root, so it cannot make job cgroups"
        return {
            "memory": why,
            "cpus": why,
            "devices": why,
            "processes": "tracked: descendants of each job's supervisor (subreaper)",
        }
    base = v2_base or layout.own_v2
    controllers = layout.v2_controllers(base)

    def state(controller: str, v2_how: str) -> str:
        if controller in controllers:
            return f"enforced: {v2_how}"
        if controller in layout.v1:
            return f"enforced: cgroup v1 {controller}"
        return f"accounted only: no {controller} controller (v2 or v1) is available"

    if layout.v2 is not None and _device_programs_work(layout.v2 / base.lstrip("/")):
        # Alone: a job the program confines is never put in a v1 devices group too.
        devices = "enforced: cgroup v2 device program (eBPF)"
    else:
        devices = state("devices", "")
    report = {
        "memory": state("memory", "cgroup v2 memory.max"),
        "cpus": state("cpuset", "cgroup v2 cpuset"),
        "devices": devices,
        "processes": (
            "tracked: a cgroup v2 group per job (cgroup.kill) and the supervisor as subreaper"
            if layout.v2 is not None
            else "tracked: cgroup v1 groups per job and the supervisor as subreaper"
        ),
    }
    if not cpus_known:
        report["cpus"] = (
            "accounted only: the node declares more CPUs than this machine has, "
            "so jobs cannot be given CPUs by id"
        )
    if not devices_known:
        report["devices"] = "accounted only: declared GPUs name no device files (node.gpus.devices)"
    return report


__all__ = [
    "JobCgroups",
    "Layout",
    "Limits",
    "current_layout",
    "enforcement",
    "oom_kills",
    "parse_layout",
    "prepare_v2_base",
    "read_pids",
]
