"""Slurm's `srun` inside a Podium job: one job step within the job's allocation.

The step's tasks are children of this srun, so they are the job's own processes:
inside its cgroups, seen and cleaned up by its supervisor, run as its user. srun
- takes the next step id in the job's step directory and records the step there
  (podium.run.steps), which the supervisor reports at the job's end;
- starts `-n` tasks (default: the job's $SLURM_NTASKS) in one process group, each with
  its rank variables (SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_ID, ... and RANK,
  WORLD_SIZE, MASTER_ADDR/PORT for torch) and its GPUs (--gpus-per-task, --gpus);
- refuses a step larger than the allocation, as Slurm does;
- sends output where --output/--error say (%t, %s, %j, ... expanded), with --label
  prefixing each line with its task id;
- forwards the signals it gets to its tasks; --kill-on-bad-exit and --wait stop the
  others when one task fails or ends;
- returns Slurm's exit code: the highest task exit code, or 128+signal when a task was
  killed by a signal; a failed task is reported as srun does ("srun: error: NODE:
  task N: Exited with exit code C").

Standard library only: a step costs one small interpreter start.
"""

from __future__ import annotations

import os
import select
import sys
import time

from podium.jobsteps.step_shape import Allocation, Step, StepError, task_env
from podium.jobsteps.task_io import Output, spawn
from podium.run.ports import free_port
from podium.run.steps import STEP_DIR_ENV, create_step, step_record, update_step

TYPE_CHECKING = False  # not `typing`'s: importing it costs srun's start-up ~5 ms
if TYPE_CHECKING:
    import signal
    from typing import Any

    from podium.jobsteps.srun_options import StepOptions
else:  # the C module: `signal` imports enum, ~7 ms of srun's start-up here
    import _signal as signal

FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGCONT,
    signal.SIGALRM,
)


def run_step(opts: StepOptions, env: dict[str, str]) -> int:
    """Run the step; return srun's exit code."""
    if not opts.open_mode_given:  # the job's, as a Slurm step has it
        opts.open_mode = env.get("SLURM_OPEN_MODE") or env.get("PODIUM_OPEN_MODE") or "truncate"
    alloc = Allocation(env)
    step = Step(opts, alloc)
    container = None
    if opts.container:  # made before the step is recorded: a bad image records nothing
        from podium.jobsteps.step_container import step_container

        run = f"job-{env.get('SLURM_JOB_ID', '')}-step-{os.getpid()}"
        container = step_container(opts.container, env, opts.chdir, step.gpus, run)
    try:
        code = _run_step(opts, env, alloc, step, container)
        if container is not None and container.get("save"):
            code = _save(container, env, code)
        return code
    finally:
        if container is not None:
            from podium.jobsteps.step_container import remove

            remove(container["state"])


def _save(container: dict[str, Any], env: dict[str, str], code: int) -> int:
    """--container-save after the step's tasks ended: srun's exit code, 1 when the
    save failed (said in one line)."""
    from podium.run.containers.lifecycle import ContainerError
    from podium.run.containers.save import save
    from podium.run.identity import Identity

    who = Identity(os.getuid(), os.getgid(), tuple(os.getgroups()), os.umask(0o022))
    os.umask(who.umask)
    try:
        save(container, str(container["save"]), who, env.get("PODIUM_SQUASH_OPTIONS"))
    except ContainerError as exc:
        print(f"srun: error: {exc}", file=sys.stderr)
        return code or 1
    return code


def _run_step(
    opts: StepOptions,
    env: dict[str, str],
    alloc: Allocation,
    step: Step,
    container: dict[str, Any] | None,
) -> int:
    step_dir = env[STEP_DIR_ENV]
    name = opts.name or os.path.basename(opts.argv[0])
    start = time.time()
    record = step_record(
        0, name=name, ntasks=step.ntasks, node=alloc.node, gpus=step.gpus, pgid=None, start=start
    )
    step_id = create_step(step_dir, record)
    record["step_id"] = step_id
    output = Output(opts, alloc.names(), step_id)
    output.width = len(str(step.ntasks - 1))
    forwarder = _Forwarder(opts.pty, f"{alloc.job_id}.{step_id}", step.ntasks)
    for sig in FORWARDED:
        signal.signal(sig, forwarder.forward)
    base = dict(env)
    if opts.name:
        base["SLURM_JOB_NAME"] = opts.name
    pids: list[int] = []
    try:
        _spawn_tasks(opts, base, alloc, step, step_id, output, container, pids, forwarder)
    except OSError as exc:
        if forwarder.pgid:
            _killpg(forwarder.pgid, signal.SIGKILL)
        for pid in pids:
            os.waitpid(pid, 0)
        output.close()
        update_step(step_dir, dict(record, state="FAILED", exit_code=2, end_time=time.time()))
        raise StepError(f"cannot run {opts.argv[0]!r}: {exc.strerror}") from None
    pgid = forwarder.pgid
    record.update(pgid=pgid, pids=pids)
    update_step(step_dir, record)
    if opts.pty:  # the step's group takes the terminal (back to ours after)
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)
        os.tcsetpgrp(0, pgid)
    try:
        statuses = _wait(pids, opts, alloc.kill_wait, pgid)
    finally:
        if opts.pty:
            os.tcsetpgrp(0, os.getpgrp())
    output.close()
    code, killed_by = _outcome(statuses, alloc.node)
    forwarded = forwarder.forwarded
    if forwarded and forwarded[-1] in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        state = "CANCELLED"
    elif code == 0 and killed_by is None:
        state = "COMPLETED"
    else:
        state = "FAILED"
    record.update(state=state, exit_code=code, signal=killed_by, end_time=time.time())
    update_step(step_dir, record)
    return 128 + killed_by if killed_by is not None and not code else code


class _Forwarder:
    """Passes the signals srun gets to its tasks' process group, as Slurm's srun: a
    lone Ctrl-C prints the step's status, a second within a second is sent on."""

    def __init__(self, pty: bool, step: str, ntasks: int) -> None:
        self.pty, self.step, self.ntasks = pty, step, ntasks
        self.pgid = 0  # the tasks' group, once the first task runs
        self.forwarded: list[int] = []
        self.interrupted = 0.0  # when the last lone Ctrl-C came

    def forward(self, signum: int, _frame: Any) -> None:
        if signum == signal.SIGINT and not self.pty:  # Slurm's: status first, abort on a second
            now = time.monotonic()
            if now - self.interrupted > 1.0:
                self.interrupted = now
                print("srun: interrupt (one more within 1 sec to abort)", file=sys.stderr)
                print(f"srun: StepId={self.step} tasks 0-{self.ntasks - 1}: running",
                      file=sys.stderr)  # fmt: skip
                return
            print(f"srun: sending Ctrl-C to StepId={self.step}", file=sys.stderr)
        self.forwarded.append(signum)
        if self.pgid:
            _killpg(self.pgid, signum)


def _spawn_tasks(
    opts: StepOptions,
    base: dict[str, str],
    alloc: Allocation,
    step: Step,
    step_id: int,
    output: Output,
    container: dict[str, Any] | None,
    pids: list[int],
    forwarder: _Forwarder,
) -> None:
    """Start the step's tasks in one process group (the first task leads it), adding
    each pid to `pids` as it starts; OSError when one cannot be started."""
    port = free_port()
    for rank in range(step.ntasks):
        stdin = _stdin(opts.input, rank)
        try:
            stdio = output.stdio(rank, stdin)
            task_environ = task_env(base, alloc, step, step_id, rank, port)
            pid = spawn(opts.argv, task_environ, opts.chdir, stdio, forwarder.pgid, container, rank)
        finally:
            if stdin > 2:
                os.close(stdin)
            output.started()
        if not forwarder.pgid:
            forwarder.pgid = pid
        pids.append(pid)


def _wait(pids: list[int], opts: StepOptions, kill_wait: float, pgid: int) -> list[int]:
    """Wait for every task (exit codes, or -signal); with --kill-on-bad-exit a failed
    task, and with --wait the first task to end, stops the rest (SIGTERM, then
    SIGKILL after the grace time)."""
    statuses: dict[int, int] = {}
    stop_at: float | None = None
    kill_at: float | None = None
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w)  # any signal (SIGCHLD above all) ends the select
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while True:
        for i, pid in enumerate(pids):
            if i in statuses:
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                statuses[i] = os.waitstatus_to_exitcode(status)
                if stop_at is None and opts.kill_on_bad_exit and statuses[i] != 0:
                    stop_at = time.monotonic()
                elif stop_at is None and opts.wait:
                    stop_at = time.monotonic() + opts.wait
        if len(statuses) == len(pids):
            break
        now = time.monotonic()
        if stop_at is not None and now >= stop_at and kill_at is None:
            _killpg(pgid, signal.SIGTERM)
            kill_at = now + kill_wait
        if kill_at is not None and now >= kill_at:
            _killpg(pgid, signal.SIGKILL)
        moment = stop_at if kill_at is None else kill_at
        timeout = 1.0 if moment is None else min(1.0, max(0.0, moment - now))
        select.select([wake_r], [], [], timeout)
        try:  # noqa: SIM105 (contextlib costs srun's start-up ~7 ms)
            os.read(wake_r, 4096)
        except BlockingIOError:
            pass
    signal.set_wakeup_fd(-1)
    os.close(wake_r)
    os.close(wake_w)
    return [statuses[i] for i in range(len(pids))]


def _stdin(mode: str | None, rank: int) -> int:
    """--input: srun's stdin for every task (the default, or "all"), for one task id
    (the others read /dev/null), none, or a file (a new descriptor, closed by the
    caller)."""
    if mode is None or mode == "all" or (mode.isdigit() and int(mode) == rank):
        return 0
    if mode == "none" or mode.isdigit():
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return os.open(mode, os.O_RDONLY | os.O_CLOEXEC)


def _killpg(pgid: int, sig: int) -> None:
    try:  # noqa: SIM105 (contextlib costs srun's start-up ~7 ms)
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _outcome(statuses: list[int], node: str) -> tuple[int, int | None]:
    """(highest exit code, first killing signal), with srun's error line per task."""
    code, sig = 0, None
    for rank, status in enumerate(statuses):
        if status > 0:
            print(
                f"srun: error: {node}: task {rank}: Exited with exit code {status}", file=sys.stderr
            )
            code = max(code, status)
        elif status < 0:
            what = signal.strsignal(-status) or f"signal {-status}"
            print(f"srun: error: {node}: task {rank}: {what}", file=sys.stderr)
            sig = sig if sig is not None else -status
    return code, sig
