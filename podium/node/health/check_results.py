"""Results, statuses and actions of health checks, and running a set of them."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any, Protocol


class Status(IntEnum):
    """Nagios plugin statuses; the value is the plugin exit code."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


class Action(StrEnum):
    """What recovery should do about a critical result, mildest first."""

    NONE = "none"
    RECORD = "record"  # counts against the GPU or node, no drain on its own
    CLEAN = "clean"  # free leftover state (GPU memory) and re-check
    DRAIN = "drain"
    RESET = "reset"  # drain, then reset the GPU
    REBOOT = "reboot"
    REPLACE = "replace"


ACTION_ORDER = list(Action)


@dataclass(frozen=True)
class Result:
    """One finding of one check: its status, a one-line reason, what to do, where."""

    check: str
    status: Status
    reason: str
    action: Action = Action.NONE
    gpu: int | None = None
    time: float = field(default_factory=time.time)
    details: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False  # the check does not apply here (status OK; reason says why)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.name.lower()
        data["action"] = self.action.value
        return data


class Check(Protocol):
    """A health check. `deep` checks are slow (burn-in, DCGM, NCCL) and run on idle nodes."""

    name: str
    deep: bool

    def run(self) -> list[Result]: ...


def run_checks(checks: Iterable[Check], deep: bool = False) -> list[Result]:
    """Run the quick checks (and the deep ones if asked); an exception in a check is an
    unknown result naming it, never a crash."""
    results: list[Result] = []
    for check in checks:
        if check.deep and not deep:
            continue
        try:
            results.extend(check.run())
        except Exception as exc:
            results.append(Result(check.name, Status.UNKNOWN, f"check failed: {exc}"))
    return results


def skipped(check: str, reason: str, gpu: int | None = None) -> Result:
    """A check that does not apply here (declared GPUs, a tool not installed): shown
    as skipped with the reason, never counted as a finding."""
    return Result(check, Status.OK, f"skipped: {reason}", gpu=gpu, skipped=True)


def worst(results: Iterable[Result]) -> Status:
    """The worst status (critical > warning > unknown > ok) of the checks that ran, as
    a Nagios exit code; skipped checks do not count."""
    return worst_status(r.status for r in results if not r.skipped)


def worst_status(found: Iterable[Status]) -> Status:
    """The worst of these statuses (critical > warning > unknown > ok)."""
    statuses = list(found)
    for status in (Status.CRITICAL, Status.WARNING, Status.UNKNOWN):
        if status in statuses:
            return status
    return Status.OK


def append_results(path: Path, node: str, results: Iterable[Result]) -> None:
    """Append results to a JSON-lines log, one object per result with its node; a log
    that cannot be written is reported on the logger, never raised."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        with open(fd, "a") as fh:  # private, as the daemon's state
            for r in results:
                fh.write(json.dumps({"node": node, **r.to_json()}) + "\n")
    except OSError as exc:
        logging.getLogger("podium.health").warning("cannot write %s: %s", path, exc)


def strongest_action(results: Iterable[Result]) -> Action:
    actions = [r.action for r in results]
    return max(actions, key=ACTION_ORDER.index, default=Action.NONE)
