"""Every health check with real recorded input: kernel log, nccl-tests, dcgmi, NVML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium.node.health.check_results import (
    Action,
    Result,
    Status,
    run_checks,
    strongest_action,
    worst,
)
from podium.node.health.dcgm import DcgmDiagCheck, parse_dcgm_diag
from podium.node.health.gpu import GpuChecks, GpuThresholds, NvmlProbe
from podium.node.health.nccl import NcclBandwidthCheck, bus_bandwidth, parse_nccl_tests
from podium.node.health.system import DiskSpaceCheck, MountCheck
from podium.node.health.xid import KmsgXidCheck, XidCheck, action_for, parse_kmsg_record, parse_xid
from podium.node.nvml_replay import RecordedNvml

DATA = Path(__file__).resolve().parents[1] / "data"
PCI = {"0000:3b:00": 0, "0000:5e:00": 1, "0000:86:00": 2, "00000000:AF:00.0": 3}


def test_xid_catalogue_and_parsing() -> None:
    assert action_for(79) is Action.REBOOT
    assert {action_for(c) for c in (48, 64, 74, 95, 119, 120)} == {Action.RESET}
    assert {action_for(c) for c in (13, 31, 43, 45, 63, 92, 94)} == {Action.RECORD}
    event = parse_xid("kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen")
    assert event is not None and (event.pci, event.code) == ("0000:3b:00", 79)
    assert parse_xid("kernel: e1000e: link up") is None


def test_xid_check_reads_new_lines_per_gpu(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text((DATA / "kern.log").read_text())
    check = XidCheck(log, PCI)
    results = check.run()
    by_gpu = {r.gpu: r for r in results}
    assert (by_gpu[0].status, by_gpu[0].action) == (Status.CRITICAL, Action.REBOOT)
    assert (by_gpu[1].status, by_gpu[1].action) == (Status.CRITICAL, Action.RESET)
    assert (by_gpu[2].status, by_gpu[2].action) == (Status.WARNING, Action.RECORD)
    assert by_gpu[3].details["xid"] == 94  # PCI ids written differently still match
    assert by_gpu[0].reason == "Xid 79 on GPU 0: GPU has fallen off the bus"
    assert [r.status for r in check.run()] == [Status.OK]  # nothing new
    with open(log, "a") as fh:
        fh.write("kernel: NVRM: Xid (PCI:0000:5e:00): 74, pid=9, name=x, NVLink: fatal\n")
    (again,) = check.run()
    assert (again.gpu, again.action) == (1, Action.RESET)
    assert XidCheck(tmp_path / "none.log", PCI).run()[0].status is Status.UNKNOWN


def test_an_xid_on_another_owners_device_is_noted_not_acted_on(tmp_path: Path) -> None:
    """The kernel log is the machine's: an Xid on a PCI device that is none of this
    node's GPUs (another daemon's declared GPU, a demo's) must not drain this node;
    with no GPUs known, the node itself is still suspect."""
    log = tmp_path / "kern.log"
    log.write_text("kernel: NVRM: Xid (PCI:d253:00:00): 79, pid=1, name=demo, fallen\n")
    (result,) = XidCheck(log, PCI).run()
    assert (result.status, result.action, result.gpu) == (Status.OK, Action.NONE, None)
    assert "not one of this node's GPUs" in result.reason
    (unknown,) = XidCheck(log, {}).run()
    assert (unknown.status, unknown.action) == (Status.CRITICAL, Action.REBOOT)


def test_nccl_tests_parsing_and_busbw() -> None:
    run = parse_nccl_tests((DATA / "all_reduce_h100_ok.txt").read_text())
    assert run.ranks == 8 and len(run.rows) == 5 and run.avg_busbw == 477.141
    largest = run.rows[-1]
    assert (largest.size, largest.algbw, largest.busbw) == (17179869184, 274.93, 481.13)
    assert bus_bandwidth("all_reduce", largest.algbw, 8) == pytest.approx(largest.busbw, rel=1e-3)
    assert bus_bandwidth("all_gather", 100.0, 8) == 87.5
    assert bus_bandwidth("broadcast", 100.0, 8) == 100.0
    with pytest.raises(ValueError, match="unknown collective"):
        bus_bandwidth("allreduce", 1.0, 8)


def test_nccl_check_against_the_h100_threshold() -> None:
    ok = NcclBandwidthCheck(DATA / "all_reduce_h100_ok.txt", "h100").run()[0]
    assert ok.status is Status.OK and ok.details["busbw_recomputed"] == pytest.approx(481.1, 0.01)
    slow = NcclBandwidthCheck(DATA / "all_reduce_h100_slow.txt", "h100").run()[0]
    assert (slow.status, slow.action) == (Status.CRITICAL, Action.DRAIN)
    assert "400.9 GB/s" in slow.reason and "460" in slow.reason
    a100 = NcclBandwidthCheck(DATA / "all_reduce_h100_slow.txt", "a100").run()[0]
    assert a100.status is Status.OK  # 400 GB/s passes the A100 threshold of 228
    missing = NcclBandwidthCheck(DATA / "nope.txt", "h100").run()[0]
    assert missing.status is Status.UNKNOWN


def test_dcgm_diag_parsing() -> None:
    results = parse_dcgm_diag((DATA / "dcgmi_diag_r2.txt").read_text())
    fail = [r for r in results if r.status is Status.CRITICAL]
    assert [(r.gpu, r.details["test"]) for r in fail] == [(5, "Page Retirement/Row Remap")]
    assert any(r.status is Status.WARNING and "PCIe" in r.reason for r in results)
    assert DcgmDiagCheck(dcgmi="dcgmi-not-installed-here").run()[0].reason.startswith("skipped")


class RecordedProbe:
    """Values as NVML returned them on a 4-GPU node with one bad and one hot GPU."""

    def __init__(self, count: int = 4) -> None:
        self.n = count

    def count(self) -> int:
        return self.n

    def ecc_uncorrected_volatile(self, index: int) -> int:
        return 2 if index == 1 else 0

    def retired_pages(self, index: int) -> int:
        return 12 if index == 1 else 0

    def row_remap(self, index: int) -> tuple[bool, bool]:
        return (index == 2, index == 3)

    def temperature_c(self, index: int) -> int:
        return 91 if index == 0 else 45

    def compute_processes(self, index: int) -> list[tuple[int, float | None]]:
        return [(4242, 512.0)] if index == 0 else []

    def recovery_action(self, index: int) -> int | None:
        return 2 if index == 3 else (None if index == 2 else 0)  # None: an older driver

    def throttle_reasons(self, index: int) -> int:
        return 0x40 | 0x01 if index == 0 else 0x01  # thermal slowdown (+ idle bit)


def test_gpu_checks_through_the_nvml_seam() -> None:
    results = GpuChecks(RecordedProbe(), expected=4, idle={0, 1}).run()
    found = {(r.check, r.gpu): r.action for r in results if r.status is Status.CRITICAL}
    assert found == {
        ("ecc", 1): Action.DRAIN,
        ("retired_pages", 1): Action.DRAIN,
        ("row_remap", 2): Action.RESET,
        ("row_remap", 3): Action.REPLACE,
        ("temperature", 0): Action.DRAIN,
        ("leftover_memory", 0): Action.CLEAN,
        ("recovery_action", 3): Action.REBOOT,
    }
    [throttle] = [r for r in results if r.check == "throttle"]
    assert (throttle.gpu, throttle.status, throttle.action) == (0, Status.WARNING, Action.RECORD)
    assert throttle.reason == "GPU 0: clocks throttled: hardware thermal slowdown"
    count = GpuChecks(RecordedProbe(3), expected=4).run()
    assert count[0].check == "gpu_count" and count[0].action is Action.REBOOT
    calm = GpuChecks(RecordedProbe(), expected=4, thresholds=GpuThresholds(max_temperature_c=95))
    assert ("temperature", 0) not in {(r.check, r.gpu) for r in calm.run() if r.status}
    assert GpuChecks(None, expected=4).run()[0].status is Status.UNKNOWN


def test_system_checks(tmp_path: Path) -> None:
    (ok,) = DiskSpaceCheck([tmp_path], max_used_percent=100.0).run()
    assert ok.status is Status.OK
    (full,) = DiskSpaceCheck([tmp_path], max_used_percent=0.0).run()
    assert (full.status, full.action) == (Status.CRITICAL, Action.DRAIN)
    (missing,) = MountCheck([tmp_path]).run()
    assert missing.status is Status.CRITICAL and str(tmp_path) in missing.reason
    assert MountCheck([Path("/")]).run()[0].status is Status.OK


def test_running_checks_never_crashes_and_summarises() -> None:
    class Broken:
        name, deep = "broken", False

        def run(self) -> list[Result]:
            raise RuntimeError("boom")

    class Deep:
        name, deep = "deep", True

        def run(self) -> list[Result]:
            return [Result("deep", Status.CRITICAL, "x", Action.REPLACE)]

    quick = run_checks([Broken(), Deep()])
    assert [(r.check, r.status) for r in quick] == [("broken", Status.UNKNOWN)]
    everything = run_checks([Broken(), Deep()], deep=True)
    assert worst(everything) is Status.CRITICAL and strongest_action(everything) is Action.REPLACE
    assert everything[1].to_json()["status"] == "critical"


def test_xid_offset_survives_between_runs_and_rotation(tmp_path: Path) -> None:
    log, state = tmp_path / "kern.log", tmp_path / "state.json"
    log.write_text((DATA / "kern.log").read_text())
    assert len(XidCheck(log, PCI, state).run()) == 4
    assert [r.status for r in XidCheck(log, PCI, state).run()] == [Status.OK]  # a new process
    log.unlink()
    log.write_text("kernel: NVRM: Xid (PCI:0000:3b:00): 48, pid=2, name=x, DBE\n")  # rotated
    (event,) = XidCheck(log, PCI, state).run()
    assert (event.gpu, event.details["xid"]) == (0, 48)


H100 = DATA / "nvml-h100.json"


def h100_probe(**changes: object) -> NvmlProbe:
    recording = json.loads(H100.read_text())
    recording["gpus"][0].update(changes)
    return NvmlProbe(RecordedNvml(recording))


def test_a_healthy_idle_h100_is_healthy_and_says_what_it_does_not_support() -> None:
    results = GpuChecks(h100_probe(), expected=1, idle={0}).run()
    assert worst(results) is Status.OK, [r.reason for r in results]
    [pages] = [r for r in results if r.check == "retired_pages"]
    assert pages.reason == "GPU 0: not supported by this GPU or driver"
    assert pages.details == {"supported": False}
    assert not [r for r in results if r.check == "leftover_memory"]  # 480 MiB: the driver's


def test_one_unsupported_signal_does_not_hide_the_others() -> None:
    results = GpuChecks(h100_probe(temperature_c=95, ecc_uncorrected_volatile=3), 1).run()
    found = {r.check for r in results if r.status is Status.CRITICAL}
    assert found == {"temperature", "ecc"}
    lost = GpuChecks(h100_probe(temperature_c="gpu_lost"), 1).run()
    assert [(r.check, r.action) for r in lost if r.status is Status.CRITICAL] == [
        ("temperature", Action.REBOOT)
    ]


def test_a_stray_process_on_an_idle_gpu_is_named() -> None:
    results = GpuChecks(h100_probe(processes=[[31337, 1024]]), 1, idle={0}).run()
    [stray] = [r for r in results if r.check == "leftover_memory"]
    assert (stray.status, stray.action) == (Status.CRITICAL, Action.CLEAN)
    assert "pid 31337" in stray.reason and "1024 MiB" in stray.reason
    busy = GpuChecks(h100_probe(processes=[[31337, 1024]]), 1, idle=set()).run()
    assert not [r for r in busy if r.check == "leftover_memory"]  # a job's own process


def test_kmsg_records_and_the_cursor(tmp_path: Path) -> None:
    assert parse_kmsg_record(
        b"3,1234,5678,-;NVRM: Xid (PCI:0000:3b:00): 79, x\n SUBSYSTEM=pci\n"
    ) == (
        1234,
        "NVRM: Xid (PCI:0000:3b:00): 79, x",
    )
    assert parse_kmsg_record(b"garbage") is None
    ring = [
        (10, "usb 1-1: new device"),
        (11, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus"),
    ]

    class Fake(KmsgXidCheck):
        def _records(self) -> list[tuple[int, str]]:
            return list(ring)

    state = tmp_path / "cursor.json"
    assert [r.status for r in Fake(PCI, state, start_at_end=True).run()] == [Status.OK]
    ring.append((12, "NVRM: Xid (PCI:0000:5e:00): 48, pid=2, name=x, DBE"))
    (event,) = Fake(PCI, state, start_at_end=True).run()  # a restarted daemon: only news
    assert (event.gpu, event.action) == (1, Action.RESET)
    assert [r.status for r in Fake(PCI, state).run()] == [Status.OK]
    denied = KmsgXidCheck(PCI, source=tmp_path / "no-such-kmsg").run()[0]
    assert denied.status is Status.UNKNOWN and "health.kernel_log" in denied.reason
