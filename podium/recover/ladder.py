"""The recovery ladder, pure: what a health finding does to a node or GPU, and what
happens next to something the agent took out of service.

A target is a whole node (gpu None) or one GPU. A fault follows HyperPod's ladder,
per GPU where the fault is a GPU's: fence (no new jobs; the jobs on it end as
NODE_FAIL), run the remedy (GPU reset, node reboot), re-check deeply, return to
service on a pass. A target with `max_faults` faults inside `fault_window_s` is a
repeat offender: it is marked for replacement and stays fenced until an admin
resumes it. With recovery "none" faults are only labelled, nothing is fenced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from podium.api.health import MIG_APPLY_FAILED, Health, Label, Remedy
from podium.node.health.check_results import Action, Result, Status


@dataclass(frozen=True)
class Fault:
    """A finding that counts against a target."""

    gpu: int | None
    kind: str  # e.g. xid-79, ecc, gpu-count, disk
    reason: str  # one line, starts with "health: "
    remedy: Remedy | None  # None: recorded only (counts toward replacement)


_REMEDY = {
    Action.CLEAN: Remedy.RESET,
    Action.RESET: Remedy.RESET,
    Action.DRAIN: Remedy.DRAIN,
    Action.REBOOT: Remedy.REBOOT,
    Action.REPLACE: Remedy.REPLACE,
}

_LABEL = {
    Remedy.RESET: Label.PENDING_RESET,
    Remedy.DRAIN: Label.DRAINED,
    Remedy.REBOOT: Label.PENDING_REBOOT,
    Remedy.REPLACE: Label.PENDING_REPLACEMENT,
}


def fault_kind(result: Result) -> str:
    """A short fault type: xid-79, or the check's name."""
    xid = result.details.get("xid")
    return f"xid-{xid}" if xid is not None else result.check.replace("_", "-")


def assess(result: Result) -> Fault | None:
    """The fault a result reports, or None when it reports none.

    Critical results with an action fence (with that remedy); warnings and critical
    results whose action is RECORD count against the target without fencing it.
    """
    if result.status not in (Status.CRITICAL, Status.WARNING):
        return None
    if result.action is Action.NONE and result.status is Status.WARNING:
        return None
    remedy = _REMEDY.get(result.action) if result.status is Status.CRITICAL else None
    return Fault(result.gpu, fault_kind(result), f"health: {result.reason}", remedy)


def on_fault(
    current: Health, fault: Fault, recent_faults: int, automatic: bool, max_faults: int, now: float
) -> Health:
    """The target's health after `fault`; `recent_faults` counts earlier faults within
    the window (this one excluded)."""
    if fault.remedy is None:
        return current
    if current.label is Label.PENDING_REPLACEMENT:
        return current
    remedy = fault.remedy
    if recent_faults + 1 >= max_faults:
        remedy = Remedy.REPLACE
    reason = fault.reason
    if remedy is Remedy.REPLACE and fault.remedy is not Remedy.REPLACE:
        reason = f"{fault.reason} (repeat offender: {recent_faults + 1} faults in the window)"
    fenced = automatic
    if current.fenced and current.remedy is Remedy.REBOOT and remedy is Remedy.RESET:
        remedy = Remedy.REBOOT  # never step down the ladder while fenced
    return replace(
        current,
        label=_LABEL[remedy],
        fenced=fenced,
        fault=fault.kind,
        reason=reason,
        remedy=remedy,
        since=now if not current.fenced else current.since,
        deep=None,
    )


class Step(StrEnum):
    """The next thing to do for a fenced target."""

    WAIT_JOBS = "wait-jobs"  # jobs still hold it (they are being stopped)
    RUN_RESET = "run-reset"
    RUN_REBOOT = "run-reboot"
    RUN_MIG_APPLY = "run-mig-apply"  # re-split the drained GPU (podium mig apply)
    WAIT_REBOOT = "wait-reboot"  # no reboot command: someone must reboot the node
    DEEP_CHECK = "deep-check"
    WAIT_ADMIN = "wait-admin"  # marked for replacement
    NOTHING = "nothing"


def next_step(
    h: Health,
    *,
    now: float,
    retry_s: float,
    busy: bool,
    node_busy: bool,
    boot_id: str,
    reset_command: bool,
    reboot_command: bool,
) -> Step:
    """What to do now for target `h`: `busy` means jobs still run on it, `node_busy`
    that jobs run anywhere on its node; `boot_id` is the node's current boot. A failed
    deep check is retried `retry_s` after it ended."""
    if not h.fenced:
        return Step.NOTHING
    if h.label is Label.PENDING_REPLACEMENT:
        return Step.WAIT_ADMIN
    if busy:
        return Step.WAIT_JOBS
    if h.label is Label.DEEP_CHECK:
        return Step.NOTHING  # running
    if h.remedy is Remedy.MIG_APPLY and h.attempts == 0:
        return Step.RUN_MIG_APPLY
    if h.remedy is Remedy.MIG_APPLY and h.fault == MIG_APPLY_FAILED:
        return Step.WAIT_ADMIN  # the GPU's layout is unknown: an admin looks first
    if h.label is Label.DEEP_FAILED and h.checked is not None and now < h.checked + retry_s:
        return Step.NOTHING  # back off before trying again
    if h.remedy is Remedy.REBOOT:
        if h.boot_id is not None and h.boot_id != boot_id:
            return Step.DEEP_CHECK  # the node has rebooted since the fault
        if reboot_command and not node_busy:
            return Step.RUN_REBOOT
        if h.gpu is not None and reset_command and h.attempts == 0:
            return Step.RUN_RESET  # try a GPU reset first: it spares the other GPUs' jobs
        return Step.WAIT_REBOOT
    if h.remedy is Remedy.RESET and reset_command and h.attempts == 0:
        return Step.RUN_RESET
    if h.label is Label.DEEP_FAILED and h.remedy is Remedy.RESET and reset_command:
        return Step.RUN_RESET
    return Step.DEEP_CHECK


def after_deep_check(
    h: Health, failures: list[Fault], recent_faults: int, max_faults: int, now: float
) -> Health:
    """The target's health after a deep check found `failures` (empty: it passed)."""
    if not failures:
        return replace(
            h,
            label=Label.SCHEDULABLE,
            fenced=False,
            fault=None,
            reason=None,
            remedy=None,
            since=None,
            boot_id=None,
            attempts=0,
            deep="passed",
            checked=now,
        )
    worst = failures[0]
    if recent_faults + 1 >= max_faults:
        return replace(
            h,
            label=Label.PENDING_REPLACEMENT,
            remedy=Remedy.REPLACE,
            reason=f"{worst.reason} (failed deep check; {recent_faults + 1} faults in the window)",
            fault=worst.kind,
            deep="failed",
            checked=now,
        )
    return replace(
        h,
        label=Label.DEEP_FAILED,
        reason=worst.reason,
        fault=worst.kind,
        deep="failed",
        checked=now,
    )


def blocking(results: list[Result], gpu: int | None) -> list[Fault]:
    """The fencing faults among `results` that concern target `gpu` (None: the node
    itself, whose faults name no GPU)."""
    out = []
    for r in results:
        f = assess(r)
        if f is not None and f.remedy is not None and f.gpu == gpu:
            out.append(f)
    return out


__all__ = [
    "MIG_APPLY_FAILED",
    "Fault",
    "Health",
    "Label",
    "Remedy",
    "Step",
    "after_deep_check",
    "assess",
    "blocking",
    "fault_kind",
    "next_step",
    "on_fault",
]


PREFIX = "podium:"  # begins the reason of a node Podium took out of service itself


def fencing_faults(results: list[Result]) -> list[Result]:
    """The results that take a node out of service: those the recovery ladder fences."""
    return [r for r in results if (f := assess(r)) is not None and f.remedy is not None]


def fence_reason(bad: list[Result]) -> str:
    """One line, starting `podium:`, that names the first fault (and a reboot if due):
    the reason a node drained for `bad` shows."""
    first = bad[0]
    text = f"{PREFIX} {first.check}: {first.reason}"
    if any(r.action is Action.REBOOT for r in bad):
        text += " (needs reboot)"
    return re.sub(r"\s+", " ", text)[:200]
