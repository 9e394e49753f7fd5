"""NVLink, PCIe and fabric checks (podium.node.health.links) through NVML's recorded
seam: each signal judged on its own, with the threshold and action of docs/resiliency.md."""

from __future__ import annotations

from typing import Any

from podium.node.health.check_results import Action, Result, Status
from podium.node.health.links import LinkChecks, LinkExpectations, NvmlLinkProbe
from podium.node.nvml_replay import RecordedNvml

H100 = "NVIDIA H100 80GB HBM3"
HEALTHY: dict[str, Any] = {
    "name": H100,
    "nvlinks": [1] * 18,
    "pcie": {"gen": 5, "max_gen": 5, "width": 16, "max_width": 16},
    "fabric": {"state": 3, "status": 0},
}


def _run(*gpus: dict[str, Any], nvlinks: int | None = None) -> dict[str, Result]:
    probe = NvmlLinkProbe(RecordedNvml({"gpus": list(gpus)}))
    results = LinkChecks(probe, LinkExpectations("h100", nvlinks)).run()
    return {f"{r.check}{r.gpu}": r for r in results}


def test_a_healthy_hgx_h100_is_ok_on_every_link() -> None:
    found = _run(HEALTHY)
    assert {k: r.status for k, r in found.items()} == {
        "nvlink0": Status.OK, "pcie0": Status.OK, "fabric0": Status.OK,
    }  # fmt: skip
    assert found["nvlink0"].reason == "GPU 0: 18 NVLinks active"
    assert found["pcie0"].reason == "GPU 0: PCIe Gen5 x16 (the device's most: Gen5 x16)"


def test_a_link_down_or_missing_is_critical_and_resets_the_gpu() -> None:
    down = dict(HEALTHY, nvlinks=[1] * 7 + [0] + [1] * 10)
    result = _run(HEALTHY, down)["nvlink1"]
    assert (result.status, result.action, result.gpu) == (Status.CRITICAL, Action.RESET, 1)
    assert result.reason == "GPU 1: 17 of 18 NVLinks active (down: 7)"
    short = dict(HEALTHY, nvlinks=[1] * 12)  # the model has 18: six are not even listed
    assert _run(short)["nvlink0"].reason == "GPU 0: 12 of 18 NVLinks active"
    assert _run(short, nvlinks=12)["nvlink0"].status == Status.OK  # the admin's count


def test_a_pcie_card_without_nvlink_is_skipped_and_held_to_its_own_links() -> None:
    pcie = dict(HEALTHY, name="NVIDIA H100 PCIe", fabric={"state": 0})
    del pcie["nvlinks"]
    found = _run(pcie)
    assert found["nvlink0"].skipped and "no NVLink" in found["nvlink0"].reason
    assert found["fabric0"].skipped and "no NVSwitch fabric" in found["fabric0"].reason
    bridged = dict(pcie, name="NVIDIA H100 NVL", nvlinks=[1] * 12)
    assert _run(bridged)["nvlink0"].status == Status.OK  # all of its 12


def test_fewer_pcie_lanes_drain_a_lower_generation_only_counts_under_load() -> None:
    narrow = dict(HEALTHY, pcie={"gen": 5, "max_gen": 5, "width": 8, "max_width": 16})
    result = _run(narrow)["pcie0"]
    assert (result.status, result.action) == (Status.CRITICAL, Action.DRAIN)
    assert "Gen5 x8 (the device's most: Gen5 x16): fewer lanes" in result.reason
    slow = dict(HEALTHY, pcie={"gen": 1, "max_gen": 5, "width": 16, "max_width": 16})
    idle = _run(dict(slow, utilization_gpu=0))["pcie0"]
    assert idle.status == Status.OK and "idle" in idle.reason
    busy = _run(dict(slow, utilization_gpu=97))["pcie0"]
    assert (busy.status, busy.action) == (Status.WARNING, Action.RECORD)
    assert "97% busy" in busy.reason


def test_a_fabric_not_registered_drains_and_a_failed_one_reboots() -> None:
    starting = _run(dict(HEALTHY, fabric={"state": 1}))["fabric0"]
    assert (starting.status, starting.action) == (Status.CRITICAL, Action.DRAIN)
    assert "nvidia-fabricmanager" in starting.reason
    failed = _run(dict(HEALTHY, fabric={"state": 3, "status": 22}))["fabric0"]
    assert (failed.status, failed.action) == (Status.CRITICAL, Action.REBOOT)


def test_a_lost_gpu_is_critical_and_an_old_recording_skips_every_link() -> None:
    lost = dict(HEALTHY, pcie="gpu_lost")
    assert _run(lost)["pcie0"].action == Action.REBOOT
    bare = {"name": H100}  # a recording without links: a driver that has none of them
    assert all(r.skipped for r in _run(bare).values())
