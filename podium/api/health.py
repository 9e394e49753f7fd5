"""The health of a node or GPU as Podium records it: labels, remedies, one record type.

Standard library only: the store persists these, the recovery ladder decides them,
the views show them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Label(StrEnum):
    """HyperPod-style health labels of a node or GPU."""

    SCHEDULABLE = "schedulable"
    PENDING_RESET = "unschedulable-pending-reset"
    PENDING_REBOOT = "unschedulable-pending-reboot"
    PENDING_REPLACEMENT = "unschedulable-pending-replacement"
    DRAINED = "unschedulable-drained"  # no new jobs; running ones finish, then a re-check
    PENDING_MIG_APPLY = "unschedulable-pending-mig-apply"  # drained for `podium mig apply`
    DEEP_CHECK = "deep-check-in-progress"
    DEEP_FAILED = "deep-check-failed"


class Remedy(StrEnum):
    """What is done to a fenced target before it is re-checked."""

    RESET = "reset"  # reset the GPU (reset_command)
    REBOOT = "reboot"  # reboot the node (reboot_command, or wait for someone to)
    DRAIN = "drain"  # nothing to run: re-check once the jobs are off it
    REPLACE = "replace"  # hardware to swap: wait for an admin
    MIG_APPLY = "mig-apply"  # once the jobs are off it: re-split the GPU, then re-check


MIG_APPLY_FAILED = "mig-apply-failed"  # the fault of a GPU whose re-split failed


@dataclass(frozen=True)
class Health:
    """A target's health (a node: gpu None, or one GPU) as the agent keeps it."""

    node: str
    gpu: int | None
    label: Label = Label.SCHEDULABLE
    fenced: bool = False
    fault: str | None = None
    reason: str | None = None
    remedy: Remedy | None = None
    since: float | None = None
    boot_id: str | None = None
    attempts: int = 0  # remedies run since it was fenced
    deep: str | None = None  # last deep check: passed / failed
    checked: float | None = None  # when the last deep check ended


__all__ = ["MIG_APPLY_FAILED", "Health", "Label", "Remedy"]
