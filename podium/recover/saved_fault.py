"""A fenced node's fault, kept on disk until its remedy is done: which remedy (reset,
reboot, replace), the boot id when it was fenced, the GPUs, and whether the reset ran.

The per-node health runners that have no store of their own keep one per node in its
state directory (`fault.json`): the Slurm hook and the Kubernetes agent. The embedded
agent keeps its faults in the daemon's store.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from podium.config.operations import HealthConfig
from podium.node.health.check_results import Result
from podium.node.health.xid import read_boot_id
from podium.run.files import read_json, write_atomic


class SavedFault:
    """The fault saved at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def record(self, remedy: str, bad: list[Result]) -> None:
        """Save the fault with its remedy, unless one is saved already (the first
        fault's remedy stands until the node is back)."""
        if self.path.exists():
            return
        gpus = sorted({r.gpu for r in bad if r.gpu is not None})
        write_atomic(
            self.path, {"remedy": remedy, "boot_id": read_boot_id(), "gpus": gpus, "done": False}
        )

    def remedy_done(self, health: HealthConfig) -> bool:
        """Whether the node may be deep-checked now. A reboot is done once the boot id
        changed; a replacement never by itself; a reset once `health.reset_command` has
        run on the fault's GPUs (GPU 0 when none is known): run here, once. With no
        fault saved, nothing is left to do but the deep check."""
        saved: dict[str, Any] = read_json(self.path) or {}
        remedy = saved.get("remedy")
        if remedy == "replace" or (remedy == "reboot" and saved.get("boot_id") == read_boot_id()):
            return False
        if remedy == "reset" and health.reset_command and not saved.get("done"):
            listed = saved.get("gpus")
            for gpu in listed if isinstance(listed, list) and listed else [0]:
                subprocess.run(
                    health.remedy_argv("reset", int(gpu)),
                    timeout=health.action_timeout_s,
                    check=False,
                )
            saved["done"] = True
            write_atomic(self.path, saved)
        return True

    def clear(self) -> None:
        """The node is back (or an administrator resumed it): forget the fault."""
        self.path.unlink(missing_ok=True)
