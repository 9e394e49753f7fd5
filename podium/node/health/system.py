"""Node checks that need no GPU: disk space and required mounts."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from podium.node.health.check_results import Action, Result, Status


class DiskSpaceCheck:
    """Used space of each path's file system; critical (drain) above the threshold."""

    name = "disk"
    deep = False

    def __init__(self, paths: list[Path], max_used_percent: float = 83.0) -> None:
        self.paths = paths
        self.max_used_percent = max_used_percent

    def run(self) -> list[Result]:
        results = []
        for path in self.paths:
            try:
                usage = shutil.disk_usage(path)
            except OSError as exc:
                results.append(Result(self.name, Status.UNKNOWN, f"{path}: {exc.strerror}"))
                continue
            used = 100.0 * usage.used / usage.total if usage.total else 0.0
            details = {"path": str(path), "used_percent": round(used, 1)}
            if used > self.max_used_percent:
                results.append(
                    Result(
                        self.name,
                        Status.CRITICAL,
                        f"{path} is {used:.1f}% full (limit {self.max_used_percent:.0f}%)",
                        Action.DRAIN,
                        details=details,
                    )
                )
            else:
                results.append(
                    Result(self.name, Status.OK, f"{path} is {used:.1f}% full", details=details)
                )
        return results


class MountCheck:
    """Required mount points (shared storage, checkpoints) must be mounted."""

    name = "mounts"
    deep = False

    def __init__(self, required: list[Path]) -> None:
        self.required = required

    def run(self) -> list[Result]:
        missing = [str(p) for p in self.required if not os.path.ismount(p)]
        if missing:
            return [
                Result(
                    self.name, Status.CRITICAL, f"not mounted: {', '.join(missing)}", Action.DRAIN
                )
            ]
        return [Result(self.name, Status.OK, f"{len(self.required)} required mount(s) present")]
