"""NVIDIA Xid errors from the kernel log, classified by a catalogue.

A kernel log line looks like
    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
The catalogue (from DESIGN.md, after NVIDIA's Xid guide and Meta's gcm): 79 -> reboot;
48, 64, 74, 95, 119, 120 -> drain and reset; 13, 31, 43, 45, 63, 92, 94 -> recorded
against the GPU but not draining alone; anything else -> recorded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from podium.node.health.base import Action, Result, Status

REBOOT = {79}
DRAIN_RESET = {48, 64, 74, 95, 119, 120}
RECORD_ONLY = {13, 31, 43, 45, 63, 92, 94}

MEANING = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: "preemptive cleanup",
    48: "double-bit ECC error",
    63: "ECC page retirement or row remap",
    64: "ECC page retirement or row remap failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}

_XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+)(?:, (.*))?")


@dataclass(frozen=True)
class XidEvent:
    pci: str
    code: int
    text: str


def action_for(code: int) -> Action:
    if code in REBOOT:
        return Action.REBOOT
    if code in DRAIN_RESET:
        return Action.RESET
    return Action.RECORD


def parse_xid(line: str) -> XidEvent | None:
    """The Xid event in a kernel log line, or None."""
    match = _XID_RE.search(line)
    if not match:
        return None
    return XidEvent(match.group(1).lower(), int(match.group(2)), (match.group(3) or "").strip())


def normalise_pci(pci: str) -> str:
    """'0000:3b:00' and '00000000:3B:00.0' name the same device: compare bus and device."""
    parts = pci.lower().split(":")
    bus = parts[-2] if len(parts) >= 2 else parts[0]
    device = parts[-1].split(".")[0]
    return f"{int(bus, 16):02x}:{int(device, 16):02x}"


class XidCheck:
    """New Xid lines in a kernel log file since the last run, per GPU.

    `pci_to_gpu` maps PCI bus ids to GPU indices (from NVML, or declared). The file is
    read from where the previous run stopped: the offset is kept in memory and, with
    `state`, in that JSON file, so one-shot runs (`podium health`) do not report the
    same event twice. A rotated (new inode) or truncated log is read from its start.
    """

    name = "xid"
    deep = False

    def __init__(
        self,
        log_path: Path,
        pci_to_gpu: dict[str, int],
        state: Path | None = None,
        start_at_end: bool = False,
    ) -> None:
        self.log_path = log_path
        self.pci_to_gpu = {normalise_pci(k): v for k, v in pci_to_gpu.items()}
        self.state = state
        self.offset = 0
        self.inode = 0
        if state is not None and state.exists():
            try:
                saved = json.loads(state.read_text())
                self.offset, self.inode = int(saved["offset"]), int(saved["inode"])
                return
            except (ValueError, KeyError, TypeError):
                pass
        if start_at_end:  # a watcher's first start: old lines are history, not news
            try:
                st = os.stat(log_path)
                self.offset, self.inode = st.st_size, st.st_ino
            except OSError:
                pass

    def run(self) -> list[Result]:
        try:
            with open(self.log_path, "rb") as fh:
                inode = os.fstat(fh.fileno()).st_ino
                fh.seek(0, 2)
                size = fh.tell()
                if size < self.offset or inode != self.inode:  # rotated or truncated
                    self.offset = 0
                fh.seek(self.offset)
                data = fh.read()
                self.offset, self.inode = fh.tell(), inode
            if self.state is not None:
                self.state.write_text(json.dumps({"offset": self.offset, "inode": self.inode}))
        except FileNotFoundError:
            return [Result(self.name, Status.UNKNOWN, f"kernel log {self.log_path} not found")]
        except PermissionError:
            return [Result(self.name, Status.UNKNOWN, f"cannot read {self.log_path}")]
        results = []
        for line in data.decode(errors="replace").splitlines():
            event = parse_xid(line)
            if event is None:
                continue
            gpu = self.pci_to_gpu.get(normalise_pci(event.pci))
            action = action_for(event.code)
            status = Status.CRITICAL if action in (Action.REBOOT, Action.RESET) else Status.WARNING
            meaning = MEANING.get(event.code, "see NVIDIA's Xid catalogue")
            where = f"GPU {gpu}" if gpu is not None else f"PCI {event.pci}"
            results.append(
                Result(
                    self.name,
                    status,
                    f"Xid {event.code} on {where}: {meaning}",
                    action,
                    gpu,
                    details={"xid": event.code, "pci": event.pci, "text": event.text},
                )
            )
        if not results:
            results.append(Result(self.name, Status.OK, "no new Xid events"))
        return results
