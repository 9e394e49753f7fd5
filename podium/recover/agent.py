"""The health agent inside the daemon: runs checks, labels and fences what fails, and
walks fenced nodes and GPUs down the recovery ladder (see `ladder`).

- Quick checks run every `health.interval_s`; Xid events as soon as the kernel logs
  them (the kernel's log is followed: podium.node.health.kernel_follow); deep checks
  (burn-in, DCGM, NCCL) run in a worker thread: on an idle node every
  `health.deep_interval_s`, on a job's GPUs after it fails, and on a fenced target
  before it returns to service.
- Every result is written as a JSON line to PODIUM_HOME/health.jsonl; findings and
  every change of a target's health are events in the database.
- Only targets the agent fenced are returned to service by it; an admin's drain is a
  separate state it never touches.

All methods run on the daemon's event-loop thread, except the deep checks themselves.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from podium.config.cluster import ClusterConfig
from podium.node.health.check_results import Check, Result, Status, append_results, run_checks
from podium.node.health.gpu import GpuChecks, GpuProbe
from podium.node.health.kernel_follow import KernelLogFollower
from podium.node.health.suite import node_checks
from podium.node.health.xid import (
    KmsgXidCheck,
    XidCheck,
    read_boot_id,
    write_xid_line,
    xid_text,
)
from podium.node.inventory import GpuInfo
from podium.recover.ladder import (
    MIG_APPLY_FAILED,
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
from podium.recover.remedies import run_mig_apply, run_remedy
from podium.store.health_table import HealthTable

log = logging.getLogger("podium.agent")


class JobsOnNode(Protocol):
    """What the agent needs from the controller about the node's jobs."""

    def gpu_jobs(
        self,
    ) -> dict[int, list[int]]: ...  # GPU index -> running jobs on it (MIG: several)
    def running_job_ids(self) -> list[int]: ...
    def fail_jobs(self, job_ids: list[int], reason: str, gpu: int | None) -> None: ...


@dataclass
class _DeepRun:
    """A deep check in flight: for which fenced targets, on which GPUs."""

    targets: list[int | None]
    gpus: list[int]
    future: Future[list[Result]]
    why: str


class HealthAgent:
    """Runs the node's health checks and its recovery ladder."""

    def __init__(
        self,
        home: Path,
        config: ClusterConfig,
        node: str,
        gpus: list[GpuInfo],
        table: HealthTable,
        jobs: JobsOnNode,
        clock: Callable[[], float],
        probe: GpuProbe | None = None,
        boot_id: Callable[[], str] = read_boot_id,
        mig_apply: Callable[[int], str] | None = None,
    ) -> None:
        """`mig_apply(gpu)` re-splits a GPU drained for `podium mig apply` and says
        what it did, or raises with a one-line reason (podium.server.mig_apply)."""
        self.home = home
        self.config = config
        self.h = config.health
        self.node = node
        self.gpus = gpus
        self.table = table
        self.jobs = jobs
        self.clock = clock
        self.probe = probe
        self.boot_id = boot_id
        self.mig_apply = mig_apply
        self.automatic = self.h.recovery == "automatic"
        self._quick = [
            c for c in node_checks(config, home, gpus, probe, xid_from_end=True) if not c.deep
        ]
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="podium-deep")
        self._checking = threading.Lock()  # checks keep state (the Xid offset): one run at a time
        self._deep: _DeepRun | None = None
        now = clock()
        self._next_quick = now
        self._next_idle_deep = now + self.h.deep_interval_s
        self._after_failure: set[int] = set()  # GPUs to deep-check once free
        self.log_path = home / "health.jsonl"
        self._xid = next((c for c in self._quick if isinstance(c, XidCheck | KmsgXidCheck)), None)
        self._xid_news = threading.Event()  # the follower saw an Xid: read it now
        self._follower: KernelLogFollower | None = None

    # --- entry points -------------------------------------------------------------

    def tick(self) -> None:
        """Called every scheduling pass: finish a deep check, run due quick checks,
        advance the ladder, start deep checks that are due."""
        now = self.clock()
        self._finish_deep(now)
        if (
            self._xid is not None
            and self._xid_news.is_set()
            and now < self._next_quick  # else the quick checks read it now anyway
            and self._checking.acquire(blocking=False)
        ):
            try:
                self._xid_news.clear()
                results = run_checks([self._xid])
            finally:
                self._checking.release()
            self.handle(results, now)
        if now >= self._next_quick and self._checking.acquire(blocking=False):
            try:
                self._next_quick = now + self.h.interval_s
                busy = set(self.jobs.gpu_jobs())
                for check in self._quick:
                    if isinstance(check, GpuChecks):  # leftover memory: GPUs with no job
                        check.idle = {g.index for g in self.gpus} - busy
                results = run_checks(self._quick)
            finally:
                self._checking.release()
            self._xid_news.clear()  # what the follower saw was read with them
            self.handle(results, now)
        self._advance(now)
        self._start_due_deep(now)

    def quick_checks(self) -> list[Check]:
        return self._quick

    def follow_kernel_log(self, wake: Callable[[], None]) -> None:
        """Follow the kernel's log as it is written (podium.node.health.kernel_follow):
        an Xid makes the next `tick`, which `wake()` asks for at once, read it, whatever
        `health.interval_s` is. Where the log cannot be followed, Xid events are read
        with the other quick checks, and the log says so."""
        check = self._xid
        if check is None or self._follower is not None:
            return

        def news() -> None:
            self._xid_news.set()
            wake()

        if isinstance(check, XidCheck):
            follower = KernelLogFollower(check.log_path, False, news)
        else:
            follower = KernelLogFollower(check.source, True, news)
        why = follower.start()
        if why is not None:
            log.warning("Xid events are read every %ss, not as written: %s", self.h.interval_s, why)
            return
        self._follower = follower

    def deep_checks(
        self, gpus: list[int] | None = None, dcgm_level: int | None = None
    ) -> list[Check]:
        """All checks, quick ones included (sharing their state), burn-in on `gpus`."""
        deep = node_checks(
            self.config, self.home, self.gpus, self.probe, burn_in_gpus=gpus, dcgm_level=dcgm_level
        )
        return self._quick + [c for c in deep if c.deep]

    def run_now(self, deep: bool) -> list[Result]:
        """Run the checks now (blocking; call from a worker thread) and return the
        results, for the caller to pass to `handle` on the loop thread."""
        with self._checking:
            checks = self.deep_checks() if deep else self._quick
            return run_checks(checks, deep)

    def _run_locked(self, checks: list[Check]) -> list[Result]:
        with self._checking:
            return run_checks(checks, True)

    def write_xid(self, gpu: int, code: int) -> str:
        """Put an Xid line for `gpu` where this agent reads the kernel's messages (the
        configured file, or /dev/kmsg), as the driver would; return where. Raises
        OSError when that cannot be written."""
        info = next((g for g in self.gpus if g.index == gpu), None)
        if info is None:
            raise ValueError(f"no GPU {gpu}: the node has GPUs 0-{len(self.gpus) - 1}")
        text = xid_text(info.bus_id, code, os.getpid(), "podium-inject")
        check = next(c for c in self._quick if isinstance(c, XidCheck | KmsgXidCheck))
        return write_xid_line(check, text)

    def job_failed(self, gpus: list[int]) -> None:
        """A job on these GPUs failed: deep-check them once they are free."""
        self._after_failure.update(gpus)

    def busy_deep(self) -> bool:
        return self._deep is not None

    def close(self) -> None:
        if self._follower is not None:
            self._follower.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- findings -----------------------------------------------------------------

    def handle(self, results: list[Result], now: float, skip: Collection[int | None] = ()) -> None:
        """Record results (JSON lines, events) and act on the faults they report.
        Targets in `skip` are judged by the deep check that produced the results.

        A fault counts once per episode: a quick check finding again what a target is
        already out of service for is not a new fault (a disk that stays full for a
        minute is one fault, not one per check). A deep check's failure is a retest
        and counts, as the ladder's "retest, then replace" intends.
        """
        append_results(self.log_path, self.node, results)
        for r in results:
            fault = assess(r)
            if fault is None:
                continue
            current = self.table.get(self.node, fault.gpu)
            ongoing = (
                fault.gpu not in skip
                and current.label is not Label.SCHEDULABLE
                and current.fault == fault.kind
            )
            if ongoing:
                continue
            self.table.record_fault(self.node, fault.gpu, fault.kind, fault.reason, now)
            self.table.log(self.node, f"{r.status.name.lower()}: {r.reason}", now)
            if fault.remedy is None or fault.gpu in skip:
                continue
            recent = (
                self.table.recent_faults(self.node, fault.gpu, now - self.h.fault_window_s) - 1
            )  # this one was just recorded
            after = on_fault(current, fault, recent, self.automatic, self.h.max_faults, now)
            if after == current:
                continue
            if after.remedy is Remedy.REBOOT and after.boot_id is None:
                after = replace(after, boot_id=self.boot_id())
            what = "fenced" if after.fenced else "labelled (recovery: none)"
            self.table.put(after, now, f"{after.label.value}: {what}: {after.reason}")
            log.warning("%s %s: %s", self._where(after), after.label.value, after.reason)
            if after.fenced and after.remedy is not Remedy.DRAIN:
                self._stop_jobs_on(after)  # broken hardware; a drain lets jobs finish

    def _stop_jobs_on(self, h: Health) -> None:
        owners = self.jobs.gpu_jobs()
        victims = self.jobs.running_job_ids() if h.gpu is None else owners.get(h.gpu, [])
        if victims:
            self.jobs.fail_jobs(sorted(set(victims)), h.reason or "health: fault", h.gpu)

    # --- the ladder ---------------------------------------------------------------

    def _advance(self, now: float) -> None:
        fenced = [h for h in self.table.all(self.node) if h.fenced]
        if not fenced:  # the usual case, every pass: nothing more to read
            return
        owners = self.jobs.gpu_jobs()
        running = bool(self.jobs.running_job_ids())
        boot = self.boot_id()
        ready: list[Health] = []
        for h in fenced:
            busy = running if h.gpu is None else h.gpu in owners
            step = next_step(
                h,
                now=now,
                retry_s=self.h.retry_s,
                busy=busy,
                node_busy=running,
                boot_id=boot,
                reset_command=bool(self.h.reset_command),
                reboot_command=bool(self.h.reboot_command),
            )
            if step is Step.RUN_RESET:
                h = self._run_remedy(h, Remedy.RESET, now)
                ready.append(h)
            elif step is Step.RUN_REBOOT:
                self._run_remedy(h, Remedy.REBOOT, now)
            elif step is Step.RUN_MIG_APPLY:
                h = self._run_mig_apply(h, now)
                if h.fault != MIG_APPLY_FAILED:
                    ready.append(h)
            elif step is Step.DEEP_CHECK:
                ready.append(h)
        if ready and self._deep is None:
            targets = [h.gpu for h in ready]
            for h in ready:
                self.table.put(replace(h, label=Label.DEEP_CHECK), now, "deep check started")
            gpus = self._gpus_for(targets)
            self._launch_deep(targets, gpus, "return to service", self.h.dcgm_level_idle)

    def _gpus_for(self, targets: list[int | None]) -> list[int]:
        if None in targets:
            return [g.index for g in self.gpus]
        return sorted(t for t in targets if t is not None)

    def _run_remedy(self, h: Health, remedy: Remedy, now: float) -> Health:
        after, event = run_remedy(h, remedy, self.h.remedy_argv, self.h.action_timeout_s)
        self.table.put(after, now, event)
        return after

    def _run_mig_apply(self, h: Health, now: float) -> Health:
        """Re-split drained GPU `h.gpu`; a failure leaves it fenced for an admin."""
        after, event = run_mig_apply(h, self.mig_apply)
        self.table.put(after, now, event)
        if after.fault == MIG_APPLY_FAILED:
            log.warning("%s: %s", self._where(after), after.reason)
        return after

    # --- deep checks --------------------------------------------------------------

    def _launch_deep(
        self, targets: list[int | None], gpus: list[int], why: str, dcgm_level: int
    ) -> None:
        checks = self.deep_checks(gpus, dcgm_level)
        future = self._pool.submit(self._run_locked, checks)
        self._deep = _DeepRun(targets, gpus, future, why)
        self.table.log(self.node, f"deep check ({why}) on GPUs {gpus or 'none'}", self.clock())

    def _start_due_deep(self, now: float) -> None:
        if self._deep is not None or (not self._after_failure and now < self._next_idle_deep):
            return
        owners = self.jobs.gpu_jobs()
        fenced = {h.gpu for h in self.table.all(self.node) if h.fenced}
        free_failed = sorted(g for g in self._after_failure if g not in owners)
        if free_failed:
            self._after_failure -= set(free_failed)
            self._launch_deep(
                [], free_failed, "after a job failed", self.h.dcgm_level_after_failure
            )
            return
        if now >= self._next_idle_deep and not self.jobs.running_job_ids() and None not in fenced:
            self._next_idle_deep = now + self.h.deep_interval_s
            idle = [g.index for g in self.gpus if g.index not in fenced]
            self._launch_deep([], idle, "idle node", self.h.dcgm_level_idle)

    def _finish_deep(self, now: float) -> None:
        run = self._deep
        if run is None or not run.future.done():
            return
        self._deep = None
        try:
            results = run.future.result()
        except Exception as exc:  # a check's crash is already an unknown result; be safe
            log.exception("deep check failed")
            results = [Result("deep", Status.UNKNOWN, f"deep check crashed: {exc}")]
        self.handle(results, now, skip=set(run.targets))
        for target in run.targets:
            h = self.table.get(self.node, target)
            if not h.fenced:
                continue
            failures = blocking(results, target)
            recent = self.table.recent_faults(self.node, target, now - self.h.fault_window_s)
            if failures:
                recent -= len(failures)  # recorded just now by handle()
            after = after_deep_check(h, failures, recent, self.h.max_faults, now)
            event = (
                "deep check passed: returned to service"
                if not failures
                else f"deep check failed: {after.label.value}: {after.reason}"
            )
            self.table.put(after, now, event)
            log.warning("%s: %s", self._where(after), event)

    def _where(self, h: Health) -> str:
        return self.node if h.gpu is None else f"{self.node} GPU {h.gpu}"


__all__ = ["HealthAgent", "JobsOnNode", "read_boot_id"]
