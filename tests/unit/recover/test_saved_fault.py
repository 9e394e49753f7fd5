"""A fenced node's saved fault (the Slurm hook's and the Kubernetes agent's): the first
fault's remedy stands, a reboot waits for a new boot id, a replacement for a person,
and a reset runs its command once on the fault's GPUs."""

from __future__ import annotations

from pathlib import Path

from podium.config.operations import HealthConfig
from podium.node.health.check_results import Action, Result, Status
from podium.recover.saved_fault import SavedFault

XID = Result("xid", Status.CRITICAL, "Xid 48 on GPU 3", Action.RESET, gpu=3)


def test_a_reset_runs_once_on_the_faults_gpus(tmp_path: Path) -> None:
    fault = SavedFault(tmp_path / "fault.json")
    fault.record("reset", [XID])
    fault.record("reboot", [XID])  # a later fault does not replace the first
    health = HealthConfig(reset_command=f"touch {tmp_path}/reset-{{gpu}}")
    assert fault.remedy_done(health) and (tmp_path / "reset-3").exists()
    (tmp_path / "reset-3").unlink()
    assert fault.remedy_done(health) and not (tmp_path / "reset-3").exists()
    fault.clear()
    assert not (tmp_path / "fault.json").exists()


def test_a_reboot_waits_for_a_new_boot_and_a_replacement_for_a_person(tmp_path: Path) -> None:
    health = HealthConfig()
    reboot = SavedFault(tmp_path / "reboot.json")
    reboot.record("reboot", [XID])
    assert not reboot.remedy_done(health)  # the same boot id as when it was fenced
    replace = SavedFault(tmp_path / "replace.json")
    replace.record("replace", [XID])
    assert not replace.remedy_done(health)
    assert SavedFault(tmp_path / "none.json").remedy_done(health)  # nothing saved: check
