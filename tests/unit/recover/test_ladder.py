"""The recovery ladder: faults to labels, steps for fenced targets, deep-check outcomes."""

from __future__ import annotations

from podium.node.health.check_results import Action, Result, Status
from podium.recover.ladder import (
    Health,
    Label,
    Remedy,
    Step,
    after_deep_check,
    assess,
    blocking,
    next_step,
    on_fault,
)

XID79 = Result("xid", Status.CRITICAL, "Xid 79 on GPU 1", Action.REBOOT, 1, details={"xid": 79})
XID48 = Result("xid", Status.CRITICAL, "Xid 48 on GPU 2", Action.RESET, 2, details={"xid": 48})
XID13 = Result("xid", Status.WARNING, "Xid 13 on GPU 0", Action.RECORD, 0, details={"xid": 13})
DISK = Result("disk", Status.CRITICAL, "/ is 95% full", Action.DRAIN)


def step(h: Health, **kw: object) -> Step:
    args: dict[str, object] = dict(
        now=100.0,
        retry_s=10.0,
        busy=False,
        node_busy=False,
        boot_id="boot-a",
        reset_command=True,
        reboot_command=False,
    )
    args.update(kw)
    return next_step(h, **args)  # type: ignore[arg-type]


def test_assess_maps_actions_to_remedies() -> None:
    f79, f48, f13, fdisk = (assess(r) for r in (XID79, XID48, XID13, DISK))
    assert f79 and (f79.gpu, f79.kind, f79.remedy) == (1, "xid-79", Remedy.REBOOT)
    assert f79.reason == "health: Xid 79 on GPU 1"
    assert f48 and f48.remedy is Remedy.RESET
    assert f13 and f13.remedy is None  # recorded, never fences alone
    assert fdisk and (fdisk.gpu, fdisk.remedy) == (None, Remedy.DRAIN)
    assert assess(Result("dcgm", Status.UNKNOWN, "skipped")) is None
    assert assess(Result("gpu", Status.OK, "fine")) is None


def test_fault_fences_with_a_label_or_only_labels_with_recovery_none() -> None:
    f = assess(XID79)
    assert f is not None
    fenced = on_fault(Health("n", 1), f, 0, True, 3, now=5.0)
    assert (fenced.label, fenced.fenced, fenced.since) == (Label.PENDING_REBOOT, True, 5.0)
    labelled = on_fault(Health("n", 1), f, 0, False, 3, now=5.0)
    assert labelled.label is Label.PENDING_REBOOT and not labelled.fenced
    recorded = assess(XID13)
    assert recorded is not None and on_fault(Health("n", 0), recorded, 0, True, 3, 5.0) == Health(
        "n", 0
    )


def test_repeat_offender_goes_to_replacement_and_stays() -> None:
    f = assess(XID48)
    assert f is not None
    h = on_fault(Health("n", 2), f, 2, True, 3, now=5.0)
    assert h.label is Label.PENDING_REPLACEMENT and "repeat offender: 3 faults" in (h.reason or "")
    assert step(h) is Step.WAIT_ADMIN
    assert on_fault(h, f, 0, True, 3, now=6.0) == h


def test_reset_ladder_steps() -> None:
    f = assess(XID48)
    assert f is not None
    h = on_fault(Health("n", 2), f, 0, True, 3, now=5.0)
    assert step(h, busy=True) is Step.WAIT_JOBS
    assert step(h) is Step.RUN_RESET
    tried = Health(**{**h.__dict__, "attempts": 1})
    assert step(tried) is Step.DEEP_CHECK
    assert step(h, reset_command=False) is Step.DEEP_CHECK  # nothing to run: re-check


def test_reboot_waits_for_a_reboot_unless_it_can_run_one() -> None:
    f = assess(XID79)
    assert f is not None
    h = on_fault(Health("n", 1), f, 0, True, 3, now=5.0)
    h = Health(**{**h.__dict__, "boot_id": "boot-a"})
    assert step(h, reset_command=False) is Step.WAIT_REBOOT
    assert step(h, reset_command=True) is Step.RUN_RESET  # a GPU reset first spares the node
    assert step(h, reboot_command=True) is Step.RUN_REBOOT
    assert step(h, reboot_command=True, node_busy=True, reset_command=False) is Step.WAIT_REBOOT
    assert step(h, boot_id="boot-b") is Step.DEEP_CHECK  # rebooted since


def test_deep_check_outcomes_and_backoff() -> None:
    f = assess(XID48)
    assert f is not None
    h = on_fault(Health("n", 2), f, 0, True, 3, now=5.0)
    passed = after_deep_check(h, [], 1, 3, now=50.0)
    assert (passed.label, passed.fenced, passed.deep) == (Label.SCHEDULABLE, False, "passed")
    failed = after_deep_check(h, [f], 1, 3, now=50.0)
    assert (failed.label, failed.fenced, failed.deep) == (Label.DEEP_FAILED, True, "failed")
    assert step(failed, now=55.0) is Step.NOTHING  # retry_s=10 not yet over
    assert step(failed, now=61.0) is Step.RUN_RESET
    last = after_deep_check(h, [f], 2, 3, now=50.0)
    assert last.label is Label.PENDING_REPLACEMENT


def test_blocking_keeps_a_targets_own_fencing_faults() -> None:
    results = [XID79, XID48, XID13, DISK]
    assert [f.kind for f in blocking(results, 2)] == ["xid-48"]
    assert [f.kind for f in blocking(results, None)] == ["disk"]
    assert blocking(results, 0) == []


def test_a_mig_apply_waits_for_the_jobs_then_applies_once_then_is_checked() -> None:
    from podium.recover.ladder import MIG_APPLY_FAILED

    h = Health("n0", 0, Label.PENDING_MIG_APPLY, True, "mig-apply", "mig apply", Remedy.MIG_APPLY)
    assert step(h, busy=True) is Step.WAIT_JOBS  # a drain: the jobs finish first
    assert step(h) is Step.RUN_MIG_APPLY
    done = Health("n0", 0, h.label, True, h.fault, h.reason, h.remedy, attempts=1)
    assert step(done) is Step.DEEP_CHECK
    failed = Health("n0", 0, h.label, True, MIG_APPLY_FAILED, "no", h.remedy, attempts=1)
    assert step(failed) is Step.WAIT_ADMIN  # its layout is unknown: never back by itself
