"""The node's RDMA network ports (InfiniBand, RoCE, AWS EFA), read from sysfs.

Every RDMA device the kernel knows is under /sys/class/infiniband (mlx5_0, efa_0,
rdmap...): each port's `state` ("4: ACTIVE"), `phys_state` ("5: LinkUp"), `rate`
("400 Gb/sec (4X NDR)") and `link_layer`. Thresholds (docs/resiliency.md):
- `health.nic_ports: N` (the ports that must be up): fewer than N ACTIVE -> critical,
  drain (multi-node training would fail or crawl on this node);
- without it, a port that is not ACTIVE -> warning, recorded (an uncabled spare port
  looks the same as a broken one; say how many must be up to have it judged);
- a port up but not ACTIVE (INIT, ARMED: no subnet manager has configured it) is
  named so.
No RDMA device: skipped, unless ports are expected (critical). Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from podium.node.health.check_results import Action, Result, Status, skipped

SYSFS = Path("/sys/class/infiniband")


@dataclass(frozen=True)
class Port:
    """One port of an RDMA device, as sysfs shows it."""

    device: str
    port: str
    state: str  # ACTIVE, DOWN, INIT, ARMED, ...
    phys_state: str  # LinkUp, Polling, Disabled, ...
    rate: str
    kind: str  # InfiniBand, Ethernet (RoCE), EFA

    @property
    def where(self) -> str:
        return f"{self.device} port {self.port}"


def _word(path: Path) -> str:
    """A sysfs value without its number: "4: ACTIVE" -> "ACTIVE"."""
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return ""
    return text.split(":", 1)[1].strip() if ":" in text else text


def read_ports(root: Path = SYSFS) -> list[Port]:
    """Every port of every RDMA device under `root`, in name order."""
    try:
        devices = sorted(p for p in root.iterdir() if (p / "ports").is_dir())
    except OSError:
        return []
    ports = []
    for device in devices:
        efa = device.name.startswith(("efa", "rdmap"))
        for port in sorted((device / "ports").iterdir(), key=lambda p: p.name):
            layer = _word(port / "link_layer") or "InfiniBand"
            ports.append(
                Port(
                    device.name,
                    port.name,
                    _word(port / "state") or "unknown",
                    _word(port / "phys_state") or "unknown",
                    _word(port / "rate"),
                    "EFA" if efa else layer,
                )
            )
    return ports


class NicPortCheck:
    """The RDMA ports' states against `expected` ACTIVE ports (None: not judged)."""

    name = "nic"
    deep = False

    def __init__(self, root: Path = SYSFS, expected: int | None = None) -> None:
        self.root = root
        self.expected = expected

    def run(self) -> list[Result]:
        ports = read_ports(self.root)
        if not ports:
            if self.expected:
                return [
                    Result(
                        self.name,
                        Status.CRITICAL,
                        f"no RDMA port under {self.root}; health.nic_ports expects "
                        f"{self.expected} ACTIVE (driver not loaded?)",
                        Action.DRAIN,
                    )
                ]
            return [skipped(self.name, f"no InfiniBand, RoCE or EFA device under {self.root}")]
        active = [p for p in ports if p.state == "ACTIVE"]
        idle = [p for p in ports if p.state != "ACTIVE"]
        details = {"active": len(active), "ports": len(ports), "expected": self.expected}
        results = [
            Result(self.name, Status.OK, f"{p.where} ({p.kind}): ACTIVE {p.rate}".rstrip())
            for p in active
        ]
        if self.expected is not None and len(active) < self.expected:
            down = ", ".join(_why(p) for p in idle) or "none listed"
            results.append(
                Result(
                    self.name,
                    Status.CRITICAL,
                    f"{len(active)} of {self.expected} expected RDMA ports ACTIVE (not: {down})",
                    Action.DRAIN,
                    details=details,
                )
            )
        elif self.expected is None:
            results += [
                Result(
                    self.name,
                    Status.WARNING,
                    f"{_why(p)}; set health.nic_ports to the ports that must be up to "
                    "have the node drained when one goes down",
                    Action.RECORD,
                )
                for p in idle
            ]
        return results


def _why(port: Port) -> str:
    """What a port that is not ACTIVE is doing, in words."""
    if port.phys_state == "LinkUp":
        return (
            f"{port.where} ({port.kind}): {port.state}: link up, not configured by a subnet manager"
        )
    return f"{port.where} ({port.kind}): {port.state} ({port.phys_state})"


__all__ = ["SYSFS", "NicPortCheck", "Port", "read_ports"]
