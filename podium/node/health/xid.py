"""NVIDIA Xid errors from the kernel log, classified by a catalogue.

A kernel log line looks like
    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
The catalogue (from DESIGN.md, after NVIDIA's Xid guide and Meta's gcm): 79 -> reboot;
48, 64, 74, 95, 119, 120 -> drain and reset; 13, 31, 43, 45, 63, 92, 94 -> recorded
against the GPU but not draining alone; anything else -> recorded.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from podium.node.health.check_results import Action, Result, Status

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


def xid_text(bus_id: str, code: int, pid: int = 0, name: str = "inject") -> str:
    """An Xid message as the NVIDIA driver writes it to the kernel log."""
    meaning = MEANING.get(code, "Xid event")
    return f"NVRM: Xid (PCI:{bus_id}): {code}, pid={pid}, name={name}, {meaning}"


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
    """'0000:3b:00' and '00000000:3B:00.0' name the same device: compare domain, bus
    and device (a bus id without a domain is in domain 0)."""
    parts = pci.lower().split(":")
    domain = parts[-3] if len(parts) >= 3 else "0"
    bus = parts[-2] if len(parts) >= 2 else parts[0]
    device = parts[-1].split(".")[0]
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}"


def xid_result(event: XidEvent, pci_to_gpu: dict[str, int], check: str = "xid") -> Result:
    """The finding for one Xid event, by the catalogue. An Xid on a PCI device that is
    none of this node's GPUs (where they are known) is another owner's: noted, never
    acted on. The kernel log is the machine's, so a second daemon or a demo on the same
    machine must not drain this one's node."""
    gpu = pci_to_gpu.get(normalise_pci(event.pci))
    if gpu is None and pci_to_gpu:
        return Result(
            check,
            Status.OK,
            f"Xid {event.code} on PCI {event.pci}: not one of this node's GPUs (ignored)",
            details={"xid": event.code, "pci": event.pci, "text": event.text},
        )
    action = action_for(event.code)
    status = Status.CRITICAL if action in (Action.REBOOT, Action.RESET) else Status.WARNING
    meaning = MEANING.get(event.code, "see NVIDIA's Xid catalogue")
    where = f"GPU {gpu}" if gpu is not None else f"PCI {event.pci}"
    return Result(
        check,
        status,
        f"Xid {event.code} on {where}: {meaning}",
        action,
        gpu,
        details={"xid": event.code, "pci": event.pci, "text": event.text},
    )


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
            if event is not None:
                results.append(xid_result(event, self.pci_to_gpu, self.name))
        if not results:
            results.append(Result(self.name, Status.OK, "no new Xid events"))
        return results


KMSG = Path("/dev/kmsg")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def parse_kmsg_record(record: bytes) -> tuple[int, str] | None:
    """(sequence number, message) of one /dev/kmsg record ("PRI,SEQ,USEC,FLAGS;TEXT"
    plus continuation lines), or None when it is not one."""
    head, sep, rest = record.partition(b";")
    fields = head.split(b",")
    if not sep or len(fields) < 2 or not fields[1].isdigit():
        return None
    message = rest.split(b"\n", 1)[0].decode(errors="replace")
    return int(fields[1]), message


class KmsgXidCheck:
    """New Xid events read from the kernel's own log (/dev/kmsg), per GPU.

    The kernel numbers its records; the last one read is kept (with the boot id) in
    `state`, so a daemon restart or a one-shot `podium health` reports nothing twice
    and misses nothing still in the kernel's buffer. After a reboot every record of
    the new boot is read. Without a saved cursor and with `start_at_end`, records
    already there are history, not news. When /dev/kmsg cannot be read, the check is
    unknown and says what to do.
    """

    name = "xid"
    deep = False

    def __init__(
        self,
        pci_to_gpu: dict[str, int],
        state: Path | None = None,
        start_at_end: bool = False,
        source: Path = KMSG,
    ) -> None:
        self.pci_to_gpu = {normalise_pci(k): v for k, v in pci_to_gpu.items()}
        self.state = state
        self.source = source
        self.boot = read_boot_id()
        self.seq: int | None = None
        self.skip_existing = start_at_end
        if state is not None:
            try:
                saved = json.loads(state.read_text())
                if saved.get("boot_id") == self.boot:
                    self.seq = int(saved["seq"])
                else:
                    self.skip_existing = False  # a new boot: all of it is news
            except (OSError, ValueError, KeyError, TypeError):
                pass

    def _records(self) -> list[tuple[int, str]]:
        fd = os.open(self.source, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        records = []
        try:
            while True:
                try:
                    chunk = os.read(fd, 16384)
                except BlockingIOError:
                    break  # no more records
                except BrokenPipeError:
                    continue  # records were overwritten while we read: go on from here
                if not chunk:
                    break
                parsed = parse_kmsg_record(chunk)
                if parsed is not None:
                    records.append(parsed)
        finally:
            os.close(fd)
        return records

    def run(self) -> list[Result]:
        try:
            records = self._records()
        except OSError as exc:
            return [
                Result(
                    self.name,
                    Status.UNKNOWN,
                    f"Xid events are not watched: cannot read {self.source} ({exc.strerror}); "
                    "run the daemon as root, or set health.kernel_log to a file that "
                    "receives the kernel's messages",
                )
            ]
        if self.skip_existing and self.seq is None:
            news: list[tuple[int, str]] = []
        else:
            news = [(s, m) for s, m in records if self.seq is None or s > self.seq]
        self.skip_existing = False
        if records:
            self.seq = max(self.seq or 0, records[-1][0])
            if self.state is not None:
                with contextlib.suppress(OSError):
                    self.state.write_text(json.dumps({"boot_id": self.boot, "seq": self.seq}))
        results = []
        for _, message in news:
            event = parse_xid(message)
            if event is not None:
                results.append(xid_result(event, self.pci_to_gpu, self.name))
        return results or [Result(self.name, Status.OK, "no new Xid events (kernel log)")]


def write_xid_line(check: XidCheck | KmsgXidCheck, text: str) -> str:
    """Put the Xid message `text` where `check` reads the kernel's messages, as the driver
    would (the configured file with a boot-clock stamp, or /dev/kmsg at error level);
    return where. Raises OSError when that cannot be written."""
    if isinstance(check, XidCheck):
        uptime = time.clock_gettime(time.CLOCK_BOOTTIME)
        with open(check.log_path, "a") as fh:
            fh.write(f"[{uptime:12.6f}] {text}\n")
        return str(check.log_path)
    fd = os.open(check.source, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, f"<3>{text}\n".encode())
    finally:
        os.close(fd)
    return str(check.source)


def read_boot_id() -> str:
    """This boot's id (the kernel's random boot_id), or "unknown"."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return "unknown"
