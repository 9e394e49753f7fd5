"""What the reactor does to the world, behind one interface (HyperQueue's `Comm`).

The reactor decides; an `Effects` carries decisions out and reports what jobs did. It
has two halves: starting a run and telling its user (`launch`, `notify`), and its
`runs`, a `RunControl` that signals runs (cancel, preempt, fail, ...) and reads how
they stand. `LocalEffects` does it with real supervisors on this machine, its `runs`
the `LocalExecutor` itself (no forwarding); a simulator or a test can give the same
reactor effects of its own.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable
from typing import Any, Protocol

from podium.api.text import printable
from podium.jobspec.job import JobSpec
from podium.run.executor import LocalExecutor, Poll
from podium.run.plan import Grant, LaunchPlan
from podium.server.launch import Planner
from podium.server.starting import StartingJob
from podium.store.db import Row

log = logging.getLogger("podium.effects")


class RunControl(Protocol):
    """The signal half of the effects: what a run is told and how it stands
    (podium.run.executor.LocalExecutor is one)."""

    def cancel(self, job_id: int) -> bool:
        """Ask a running job to stop (CANCELLED); False when nothing runs it."""

    def preempt(self, job_id: int) -> bool:
        """Ask a running job to stop for a preemption (PREEMPTED)."""

    def saved(self, job_id: int, step: int) -> bool:
        """A job being stopped said it checkpointed: stop it now, not at its grace's end."""

    def resize(self, job_id: int, replicas: int, grace_s: float) -> bool:
        """Ask a running elastic job to stop for a resize to `replicas` (its replicas
        get `grace_s` to save; it ends PREEMPTED and starts again at the new size)."""

    def requeue(self, job_id: int) -> bool:
        """Ask a running job to stop for a requeue its user asked for (SIGTERM; it
        ends PREEMPTED and, with its preempt mode set to requeue, is queued again)."""

    def fail(self, job_id: int, reason: str, gpu: int | None, replace: bool = False) -> bool:
        """Stop a running job at once because its hardware failed (NODE_FAIL); with
        `replace`, its supervisor gives the failed replica's place to a spare instead
        when it can (podium.run.replace)."""

    def send_signal(self, job_id: int, sig: int, scope: str) -> bool:
        """Have a running job's processes in `scope` (steps, batch, full) get `sig`."""

    def poll(self, job_id: int) -> Poll:
        """How the job's run stands: running, ended (with its result), vanished,
        unlaunched or lost (its state gone with a restarted machine)."""

    def kill_leftovers(self, job_id: int, scan_session: bool) -> int:
        """Kill what is left of an ended run; the number of processes still alive."""

    def forget(self, job_id: int) -> None:
        """Let go of the runtime state of a run whose end is recorded."""

    def live_steps(self, job_id: int) -> list[dict[str, Any]]:
        """A running job's steps so far (podium.run.steps records), as srun wrote them."""

    def add_spares(self, job_id: int, spares: list[list[int]]) -> bool:
        """Give a running job new spares (each one replica's GPUs)."""
        ...

    def rank_seconds(self, job_id: int, world: int | None) -> dict[int, tuple[float, float]]:
        """Each rank's step and its last step's seconds outside the collectives (ranks
        0..world-1)."""
        ...

    def replacements(self, job_id: int) -> list[dict[str, Any]]:
        """The replicas its supervisor replaced from spares so far (podium.run.replace)."""
        ...

    def dropped_spares(self, job_id: int) -> list[int]:
        """The GPUs of spares its supervisor dropped for a fault on them (podium.run.replace)."""
        ...

    def fault_note(self, job_id: int) -> tuple[str, int | None] | None:
        """The hardware fault an earlier daemon stopped this run for, if any."""

    def reap(self) -> int:
        """Collect exited children (no zombies); how many."""


class Effects(Protocol):
    """The side effects of the reactor's transitions."""

    runs: RunControl

    def launch(self, job: StartingJob, spec: JobSpec, grant: Grant) -> None:
        """Start the job's run with this grant; raise when it cannot start."""

    def notify(self, row: Row, spec: JobSpec, kind: str, what: str) -> None:
        """Tell the job's user about an event of kind BEGIN, END, FAIL, REQUEUE or
        TIME_LIMIT (mail, when the job asked for it)."""


class LocalEffects:
    """Effects on this machine: supervisors through `executor` (which is `runs`), mail
    through the configured command, both as the job's user."""

    def __init__(
        self,
        executor: LocalExecutor,
        planner: Planner,
        record: Callable[[int, str], None] | None = None,
    ) -> None:
        self.executor = executor
        self.runs: RunControl = executor
        self.planner = planner
        self.mail_command = planner.config.mail_command
        self.record = record  # (job id, detail): a mail event in the job's history

    def plan(
        self, job: StartingJob, spec: JobSpec, grant: Grant, make_dirs: bool = True
    ) -> LaunchPlan:
        """The first half of a start: the plan its supervisor would run (a dry run
        stops here, with `make_dirs` off)."""
        script = str(self.executor.job_dir(job.job_id) / "script")
        return self.planner.plan(job, spec, grant, script, make_dirs)

    def launch(self, job: StartingJob, spec: JobSpec, grant: Grant) -> None:
        self.executor.launch(self.plan(job, spec, grant), spec.script)

    def notify(self, row: Row, spec: JobSpec, kind: str, what: str) -> None:
        if not spec.mail_types:
            return
        wanted = set(spec.mail_types)
        if (
            "ALL" not in wanted
            and kind not in wanted
            and not (kind == "TIME_LIMIT" and "FAIL" in wanted)
        ):
            return
        subject = printable(f"Podium job {row['job_id']} ({row['name']}) {what}")
        recipient = spec.mail_user or row["user"]
        if self.record is not None:
            sent = "sent" if self.mail_command else "not sent: no mail transport"
            self.record(row["job_id"], f"{kind} to {recipient}: {subject} ({sent})")
        if not self.mail_command:
            return
        who = self.planner.identity(row["uid"], row["gid"], row["user"], spec.umask)
        try:
            # As the job's user, and `--` first: the recipient can never be an option.
            subprocess.Popen(
                [self.mail_command, "-s", subject, "--", recipient],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                cwd="/",
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "USER": row["user"]},
                **who.subprocess_kwargs(),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("mail for job %s failed: %s", row["job_id"], exc)
