"""How a supervised job turned out: its result record (the highest task exit code,
the first terminating signal, its state) and its steps for accounting. A mixin of
podium.run.supervisor.Supervisor, apart so each stays one job's size. Standard library
only (the supervisor imports it at every job start)."""

from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, Any

from podium.run.results import result_record
from podium.run.steps import finish_running, step_record, stopped_state

if TYPE_CHECKING:
    from podium.run.containment import JobContainment
    from podium.run.launch_failure import LaunchFailure
    from podium.run.plan import LaunchPlan, TaskPlan


class JobOutcome:
    """The result of a run; the Supervisor provides the fields."""

    plan: LaunchPlan
    tasks: dict[int, TaskPlan]
    status: dict[int, tuple[int | None, int | None]]
    contain: JobContainment
    start: float
    final_state: str | None
    stopped_at: float | None
    reason: str
    fault: str | None
    save_failure: str | None
    launch_failure: LaunchFailure | None

    def _steps(self) -> list[dict[str, Any]]:
        raise NotImplementedError  # the Supervisor's

    def step_records(self, state: str, exit_code: int | None, sig: int | None) -> list[Any]:
        """Every step of this run for accounting: the batch step (the script itself),
        then the srun steps, those still running marked with the job's end state."""
        end = time.time()
        batch_state = state if self.stopped_at is None else stopped_state(state)
        batch = step_record(
            0, name="batch", ntasks=1, node=self.plan.node, gpus=list(self.plan.gpu_ids),
            pgid=None, start=self.start, state=batch_state, exit_code=exit_code,
            signal_num=sig, end=end,
        )  # fmt: skip
        batch["step_id"] = "batch"
        return [batch, *finish_running(self._steps(), state, end, self.stopped_at)]

    def result(self, leftover: int) -> dict[str, Any]:
        """The job's outcome: highest task exit code, first terminating signal, state."""
        tasks = []
        for pid, task in self.tasks.items():
            code, sig_num = self.status.get(pid, (None, signal.SIGKILL))
            tasks.append({"procid": task.procid, "exit_code": code, "signal": sig_num})
        codes = [t["exit_code"] for t in tasks if t["exit_code"] is not None]
        signals = [t["signal"] for t in tasks if t["signal"] is not None]
        exit_code = max(codes) if codes else None
        sig = signals[0] if signals else None
        oom = self.contain.oom_kills()
        if self.final_state is not None:
            state = self.final_state
        elif oom:  # as Slurm: any OOM kill in the job makes it OUT_OF_MEMORY
            state = "OUT_OF_MEMORY"
            mem = self.plan.mem_mb
            self.reason = f"OutOfMemory: {oom} process(es) killed at the {mem} MiB limit"
        elif tasks and all(t["exit_code"] == 0 for t in tasks):
            state = "COMPLETED"
        else:
            state = "FAILED"
        if self.save_failure and state in ("COMPLETED", "FAILED"):
            state, self.reason = "FAILED", self.save_failure
        if self.launch_failure is not None and exit_code is None:
            exit_code = self.launch_failure.exit_code
        if exit_code is None and sig is None:
            exit_code = 0
        return result_record(
            state,
            exit_code,
            sig,
            self.start,
            reason=self.reason,
            tasks=tasks,
            leftover=leftover,
            fault=self.fault,
            steps=self.step_records(state, exit_code, sig),
        )
