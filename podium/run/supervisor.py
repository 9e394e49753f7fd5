"""The per-job supervisor (like slurmstepd): one job from its LaunchPlan to its result,
run by the daemon through podium.run.supervisor_main (`main([_, JOB_DIR, LOCK_FD])`).

Contract:
- It holds the flock on JOB_DIR/lock (inherited from the daemon) until the job is
  over (its result written, none of its processes left), then tells the daemon
  (podium.run.endwatch); "the lock is held" is how the daemon knows a job is still
  being supervised.
- It writes JOB_DIR/started.json (its pid, start time and the job's cgroups) before
  starting any task, and JOB_DIR/result.json (atomically) when the job is over,
  whatever happened. It starts the tasks once.
- It starts all tasks together; when the job ends, none of its processes survives.
- SIGTERM/SIGINT/SIGHUP to the supervisor means cancel: the job's processes get
  SIGTERM, then SIGKILL after the grace time, and the state is CANCELLED. Reaching
  the time limit does the same with state TIMEOUT. SIGUSR1 means preempt: the job's
  --signal (or SIGTERM), the grace time, SIGKILL, state PREEMPTED; with
  JOB_DIR/resize.json it resizes an elastic job instead (podium.run.resize_notice),
  also ending PREEMPTED. SIGUSR2 means its
  hardware failed: SIGKILL at once, state NODE_FAIL (the GPU is gone; nothing the job
  could still do would be trusted). SIGCHLD also wakes it to deliver the signals
  users sent (podium.run.job_signals).
- With a heartbeat timeout, the job must touch PODIUM_HEARTBEAT_FILE at least that
  often once it has touched it, and first within the start-up allowance
  (podium.run.hang_watch); when it does not, it is hung: SIGTERM, the grace time,
  SIGKILL, state FAILED with reason "hang: ..." and fault "hang" (no fault when the
  ranks named are hung after every other rank ended with exit 0: the training is done).
- It writes JOB_DIR/tasks.json (each task's pid by rank) once all tasks started, and
  again when a replica is replaced.
- A job with spares (plan.spares) that takes part in the contract has a replica that
  failed alone (a fault order with `replace`, a crash, a hung rank) replaced from a
  spare while the others run (podium.run.replica_faults, podium.run.replace).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.run.cgroups import Limits
from podium.run.containment import JobContainment, reap_children
from podium.run.deadline import Deadline
from podium.run.files import (
    HEARTBEAT_FILE,
    REQUEUE_FILE,
    RESIZE_FILE,
    RESIZE_NOTICE,
    SAVED_FILE,
    TASKS_FILE,
    read_json,
    write_atomic,
)
from podium.run.hang_watch import HangWatch
from podium.run.job_files import task_files
from podium.run.job_signals import Inbox
from podium.run.launch_failure import LaunchFailure
from podium.run.outcome import JobOutcome
from podium.run.plan import LaunchPlan
from podium.run.ports import free_port
from podium.run.rank_beats import RANKS_DIR, make_ranks_dir
from podium.run.replace import REPLACE_NOTICE, Spares
from podium.run.replica_faults import INSTANCE_ENV, ReplicaFaults
from podium.run.resize_notice import acknowledged, own_file, write_notice
from podium.run.spawn import SpawnError, spawn_task
from podium.run.steps import (
    STEP_DIR_ENV,
    STEPS_DIR,
    read_steps,
    signal_steps,
)
from podium.run.stopping import (
    FAULT_SIGNAL,
    PREEMPT_SIGNAL,
    STOP_SIGNALS,
    ChildError,
    Stopped,
    call_in_child,
)
from podium.run.task_env import job_identity, task_environment
from podium.run.torchelastic import torchelastic_environment
from podium.run.torchft import torchft_environment

if TYPE_CHECKING:
    from podium.run.plan import TaskPlan

TERM = int(signal.SIGTERM)
WATCHED = {signal.SIGCHLD, PREEMPT_SIGNAL, FAULT_SIGNAL, *STOP_SIGNALS}


class Supervisor(ReplicaFaults, HangWatch, JobOutcome):
    """Runs one job from its LaunchPlan to its JobResult."""

    def __init__(self, job_dir: Path, plan: LaunchPlan) -> None:
        self.job_dir = job_dir
        self.plan = plan
        self.contain = JobContainment(
            plan.job_id,
            plan.proctrack,
            Limits(
                mem_mb=plan.mem_mb,
                cpu_ids=tuple(plan.cpu_ids),
                deny_devices=tuple((str(k), int(a), int(b)) for k, a, b in plan.deny_devices),
            ),
            plan.cgroup_v2_base,
        )
        self.tasks: dict[int, TaskPlan] = {}
        self.status: dict[int, tuple[int | None, int | None]] = {}
        self.start = time.time()
        self.final_state: str | None = None
        self.stopped_at: float | None = None  # when Podium began stopping the job
        self.reason = "None"
        self.fault: str | None = None
        self.heartbeat: Path | None = None
        self.heartbeat_made: float | None = None
        self.container_state: str | None = None  # its writable layers, in the user's cache
        self.container: dict[str, Any] | None = None  # as prepared, for --container-save
        self.save_failure: str | None = None  # why --container-save could not save
        self.launch_failure: LaunchFailure | None = None  # why the job never ran
        self.heartbeat_timeout = float(plan.heartbeat_timeout_s or 0)
        self.ranks: Path | None = None  # each rank's step (podium.run.rank_beats)
        if self.heartbeat_timeout:
            self.heartbeat = job_dir / HEARTBEAT_FILE
            self.ranks = job_dir / RANKS_DIR
        self.notice: Path | None = job_dir / RESIZE_NOTICE if plan.replicas is not None else None
        stack = "torchelastic" if plan.torchelastic else "torchft" if plan.torchft else ""
        self.spares = Spares(job_dir, plan.spares, stack) if plan.spares else None
        self.master_port = 0  # the tasks' MASTER_PORT (a TorchElastic job's rendezvous)
        self.lighthouse = ""  # a torchft job's lighthouse, its URL ("": none runs)
        self.spawned = 0  # tasks and standbys started so far
        self.instances: dict[int, int] = {}  # pid -> its INSTANCE_ENV
        self.pgid = 0  # the tasks' process group
        self._how: tuple[Any, ...] = ()  # launch's creds, container, heartbeat for _spawn

    @property
    def limit_end(self) -> float | None:
        """When the job's time limit (as submitted) runs out; None without one."""
        limit = self.plan.time_limit_s
        return None if limit is None else self.start + limit

    # -- lifecycle ---------------------------------------------------------------

    def launch(self) -> None:
        """Start every task; if one cannot start, stop the others and fail the job."""
        plan = self.plan
        who = job_identity(plan)
        creds = (who.uid, who.gid, list(who.groups)) if who.is_switch_needed else None
        port = self.master_port = free_port()
        container = None
        request = plan.container
        if request:
            from podium.run.containers.lifecycle import prepare

            run = f"job-{plan.job_id}-{os.getpid()}"
            try:  # in a child: a user's image path, lock or registry cannot hold the job
                container = call_in_child(lambda: prepare(request, run, who), self.limit_end)
            except ChildError as exc:
                raise SpawnError(str(exc)) from None  # exit code 1, as a Pyxis failure
            self.container_state = container["state"]
            self.container = container
        heartbeat = None
        owner = (plan.uid, plan.gid) if creds is not None else None
        if self.heartbeat is not None:
            own_file(str(self.heartbeat), owner)
            self.heartbeat_made = os.stat(self.heartbeat).st_mtime
            heartbeat = str(self.heartbeat)
        if self.ranks is not None:
            make_ranks_dir(self.ranks, owner)
        if self.notice is not None:  # an elastic job reads resizes here, and answers
            own_file(str(self.notice), owner)
        if self.spares is not None:  # ... and takes part in replacements here
            self.spares.create(owner)
        self._how = (creds, container, heartbeat)
        if plan.torchelastic and container is None:
            self.host_rendezvous_store(port)
        if plan.torchft and container is None:
            self.lighthouse = self.host_lighthouse()
        for task in plan.tasks:  # only the first truncates the output (--open-mode)
            group_port = free_port() if plan.torchft else port  # each group's own store
            pid = self._spawn(task, group_port, {}, bool(self.tasks))
            if self.pgid == 0:
                self.pgid = pid
            self.tasks[pid] = task
        pids = {str(t.procid): pid for pid, t in self.tasks.items()}
        write_atomic(self.job_dir / TASKS_FILE, pids, durable=False)

    def _spawn(self, task: TaskPlan, port: int, extra: dict[str, str], append: bool) -> int:
        """Start one task (a replica) in the job's process group; `append`: to its
        output files, as a replacement does, rather than as the job's --open-mode."""
        plan = self.plan
        creds, container, heartbeat = self._how
        env = task_environment(plan, task, port, heartbeat, self.start)
        env[STEP_DIR_ENV] = str(self.job_dir / STEPS_DIR)
        if self.ranks is not None:
            env["PODIUM_RANK_BEATS"] = str(self.ranks)
        if self.notice is not None:
            env["PODIUM_RESIZE_FILE"] = str(self.notice)
        if self.spares is not None:
            env["PODIUM_REPLACE_FILE"] = str(self.job_dir / REPLACE_NOTICE)
        if plan.torchelastic:
            torchelastic_environment(env)
        if plan.torchft:
            torchft_environment(env, task.procid, len(plan.tasks), self.lighthouse)
        env.update(extra)
        self.spawned += 1  # what its orphans carry when it is replaced (replica_faults)
        env[INSTANCE_ENV] = str(self.spawned)
        pid = spawn_task(
            plan.argv,
            env,
            plan.work_dir,
            files=task_files(plan._replace(open_mode="append") if append else plan, task),
            end=self.limit_end,
            pgid=self.pgid,
            creds=creds,
            cgroup_procs=self.contain.procs_files,
            umask=plan.umask,
            cpu_ids=list(plan.cpu_ids) or None,
            container=container,
            procid=task.procid,
        )
        self.instances[pid] = self.spawned
        return pid

    def _reap(self) -> None:
        reap_children(self._record)

    def _record(self, pid: int, status: int) -> None:
        if pid in self.tasks and pid not in self.status:
            code = os.waitstatus_to_exitcode(status)
            self.status[pid] = (code, None) if code >= 0 else (None, -code)
        elif self.spares is not None:
            self.spares.standby_ended(pid)

    def _running(self) -> bool:
        return len(self.status) < len(self.tasks)

    def _signal_tasks(self, sig: int, batch_only: bool) -> None:
        """--signal: to the batch shell alone with `B:`, else to every running step
        (not the batch shell), as Slurm sends it."""
        if batch_only:
            first = next(iter(self.tasks), None)
            if first is not None and first not in self.status:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(first, sig)
            return
        signal_steps(self._steps(), sig, self.contain.members())

    def _deliver(self, sig: int, scope: str) -> None:
        """`scancel --signal`: to the running steps, the batch shell (-b) or every
        process of the job (-f), as Slurm sends it (podium.run.job_signals)."""
        if scope == "full":
            self.contain.signal_all(sig)
        else:
            self._signal_tasks(sig, scope == "batch")

    def _steps(self) -> list[dict[str, Any]]:
        """The job's steps as its srun calls recorded them (read as the job's user)."""
        with job_identity(self.plan).entered():
            return read_steps(self.job_dir / STEPS_DIR)

    def _terminate(self, state: str, sig: int = signal.SIGTERM) -> None:
        """SIGCONT + `sig` to every process, wait the grace time, then SIGKILL."""
        self.final_state = state
        self.stopped_at = time.time()
        self.contain.signal_all(signal.SIGCONT)
        self.contain.signal_all(sig)
        deadline = time.monotonic() + self.plan.kill_wait_s
        while time.monotonic() < deadline:
            self._reap()
            if not self.contain.members():
                return
            if (self.job_dir / SAVED_FILE).exists():
                return  # it checkpointed in its grace and said so: no need to wait more
            signal.sigtimedwait(WATCHED, min(0.1, max(0.0, deadline - time.monotonic())))

    def supervise(self) -> None:
        plan = self.plan
        limits = Deadline(
            self.job_dir, self.start, plan.time_limit_s, plan.signal_num, plan.signal_before_s
        )
        inbox = Inbox(self.job_dir)
        while True:
            self._reap()
            if self.spares is not None:
                self.spares.take_orders()
                self.start_standbys()
                if self.replace_casualty():
                    continue
            if not self._running():
                if self.spares is not None:
                    self.spares.stop_standbys()
                return
            limits.refresh()
            for sig, scope in inbox.new():  # scancel --signal
                self._deliver(sig, scope)
            now = time.time()
            if limits.signal_at is not None and now >= limits.signal_at:
                self._signal_tasks(plan.signal_num or signal.SIGTERM, plan.signal_batch_only)
                limits.signal_sent()
            if limits.end is not None and now >= limits.end:
                self._terminate("TIMEOUT")
                return
            if self.heartbeat is not None:
                hang = self._hang(now)
                if hang is not None and self.replace_hung(*hang):
                    continue
                if hang is not None and hang[1] and self.peers_done(hang[1]):
                    self.reason = f"hang: {hang[0]}, after every other rank ended with exit 0"
                    self._terminate("FAILED")  # not a fault: nothing to requeue for
                    return
                if hang is not None:
                    self.reason, self.fault = f"hang: {hang[0]}", "hang"
                    self._terminate("FAILED")
                    return
            info = signal.sigtimedwait(WATCHED, limits.wait_s(now))
            if info is not None and info.si_signo in STOP_SIGNALS:
                self._terminate("CANCELLED")
                return
            if info is not None and info.si_signo == PREEMPT_SIGNAL:
                order = read_json(self.job_dir / RESIZE_FILE)
                if order is not None and self.notice is not None:
                    self._resize(order)
                    return
                asked = (self.job_dir / REQUEUE_FILE).exists()  # a requeue: plain SIGTERM
                self._terminate("PREEMPTED", TERM if asked else plan.signal_num or TERM)
                return
            if info is not None and info.si_signo == FAULT_SIGNAL:
                if self.replace_on_fault():
                    continue
                self.fault = "node"
                self.final_state = "NODE_FAIL"
                self.stopped_at = time.time()
                self.contain.signal_all(signal.SIGKILL)
                return

    def _resize(self, order: dict[str, Any]) -> None:
        """An elastic job is resized: every replica gets the job's resize signal and
        the notice (`podium.run.resize_notice`). What is left at the deadline, or
        once the job acknowledges, is stopped as a preemption stops it. The job ends
        PREEMPTED; the daemon starts it again at the new size."""
        assert self.notice is not None
        grace = max(0.0, float(order.get("grace_s", 60)))
        deadline = time.time() + grace
        to = int(order.get("replicas", 0))
        self.final_state, self.stopped_at = "PREEMPTED", time.time()
        self.reason = f"resized to {to} replica(s)"
        write_notice(str(self.notice), to, deadline, self.plan.resize_count + 1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, self.plan.resize_signal)
        while time.time() < deadline:
            self._reap()
            if not self.contain.members():
                return  # every replica saved and left
            if acknowledged(str(self.notice)) or (self.job_dir / SAVED_FILE).exists():
                break
            info = signal.sigtimedwait(WATCHED, min(0.1, max(0.0, deadline - time.time())))
            if info is not None and info.si_signo in STOP_SIGNALS:
                self._terminate("CANCELLED")
                return
            if info is not None and info.si_signo == FAULT_SIGNAL:
                self.fault, self.final_state = "node", "NODE_FAIL"
                self.contain.signal_all(signal.SIGKILL)
                return
        self._terminate("PREEMPTED", TERM)

    def save_container(self) -> None:
        """--container-save: the container as the first task left it, saved as the
        job's user (podium.run.containers.save); a failure fails the job with why."""
        from podium.run.containers.save import save

        container = self.container
        assert container is not None
        plan = self.plan
        request = plan.container or {}
        options = (request.get("import_env") or {}).get("PODIUM_SQUASH_OPTIONS")
        try:  # in a child: a save that hangs cannot hold the job past a cancel
            call_in_child(
                lambda: save(container, str(container["save"]), job_identity(plan), options),
                self.limit_end,
            )
        except ChildError as exc:
            self.save_failure = str(exc)
        except Stopped as stop:
            self.final_state, self.stopped_at = stop.state, time.time()
            self.save_failure = f"--container-save: stopped ({stop.state}) before it was saved"
