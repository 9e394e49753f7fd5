"""A pass's starts and resizes carried out. Starts: pending array tasks split into rows
of their own, the starts recorded RUNNING in one commit, then each run launched
(`Effects.launch`); a job whose planning or launch raises is held with the reason, and
the others start. Resizes: each recorded, then its job stopped to start again at its
new size."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from podium.api.selection import JobFilter
from podium.jobspec.job import JobSpec, JobState
from podium.run.plan import Grant
from podium.sched import Start
from podium.sched.model import Resize
from podium.server.effects import Effects
from podium.server.ends import RunEnds
from podium.server.launch import Planner
from podium.server.local_node import LocalNode
from podium.server.running_specs import RunningSpecs
from podium.server.snapshot import PendingQueue
from podium.server.starting import StartingJob
from podium.store.db import Row, RunningStart, Store

log = logging.getLogger("podium.reactor")


@dataclasses.dataclass
class PassStarts:
    """Carries out a pass's starts and resizes for the reactor, with what that needs of
    it: its store, node, planner, effects, queue (`queue.arrays`), running jobs' specs
    and RunEnds (which holds a job that broke its start), and its clock (read through
    the reactor each time: tests replace it)."""

    store: Store
    node: LocalNode
    planner: Planner
    effects: Effects
    queue: PendingQueue
    clock: Callable[[], float]
    specs: RunningSpecs
    ends: RunEnds

    def running_rows(self) -> list[Row]:
        return self.store.jobs(JobFilter(states=(JobState.RUNNING.value,)))

    def start(self, starts: tuple[Start, ...]) -> None:
        """Record the starts as RUNNING (one commit), then launch each run.

        The commit comes first: a daemon that dies between the two leaves jobs that
        recovery finds never launched, never a job running twice. A job whose planning
        or launch raises is held with the reason (`hold_broken`); the others start.
        """
        starts = self._split_arrays(starts)
        rows = {r["job_id"]: r for r in self.store.rows_of([s.job_id for s in starts])}
        records = []
        planned: dict[int, tuple[StartingJob, JobSpec, Grant]] = {}
        free_cpus = self.planner.free_cpu_ids(self.running_rows())
        for start in starts:
            row = rows[start.job_id]
            try:
                job, spec = StartingJob.of_row(row), self.specs.of(row)
                stdout = self.planner.output_path(job, spec, spec.output)
                stderr = self.planner.output_path(job, spec, spec.error) if spec.error else stdout
            except Exception as exc:
                self.ends.hold_broken(start.job_id, "cannot plan its start", exc)
                continue
            take = tuple(free_cpus[: start.cpus]) if len(free_cpus) >= start.cpus else ()
            free_cpus = free_cpus[start.cpus :]
            grant = self.node.grant_of(start.gpu_indices, start.cpus, start.mem_mb, take)
            planned[start.job_id] = (job, spec, grant)
            records.append(
                RunningStart(
                    start.job_id,
                    self.node.name,
                    grant.units,
                    grant.cpus,
                    grant.mem_mb,
                    stdout,
                    stderr,
                    grant.cpu_ids,
                )
            )
        marked = set(self.store.mark_running(records, self.clock()))
        for start in starts:
            if start.job_id not in marked:
                continue
            row = rows[start.job_id]
            job, spec, grant = planned[start.job_id]
            try:
                self.effects.launch(job, spec, grant)
            except Exception as exc:
                self.ends.hold_broken(start.job_id, "launch failed", exc)
                continue
            self.effects.notify(row, spec, "BEGIN", "began")

    def _split_arrays(self, starts: tuple[Start, ...]) -> tuple[Start, ...]:
        """The starts, each of a pending array's tasks made its own row first (the
        lowest indices, in order): a pass starts an array's tasks as the array."""
        by_array: dict[int, int] = {}
        for s in starts:
            if s.job_id in self.queue.arrays:
                by_array[s.job_id] = by_array.get(s.job_id, 0) + 1
        if not by_array:
            return starts
        now = self.clock()
        tasks = {a: iter(self.store.split_tasks(a, n, now)) for a, n in by_array.items()}
        out = []
        for s in starts:
            if s.job_id not in tasks:
                out.append(s)
                continue
            task = next(tasks[s.job_id], None)  # None: fewer were left than the pass saw
            if task is not None:
                out.append(dataclasses.replace(s, job_id=task))
        return tuple(out)

    def resize(self, resizes: tuple[Resize, ...]) -> None:
        """Have each elastic job the pass resized stopped, to start again at its new
        size (the resize is recorded first: it survives a restart of the daemon)."""
        running = {r["job_id"]: r for r in self.running_rows()}
        now = self.clock()
        for resize in resizes:
            row = running.get(resize.job_id)
            elastic = self.specs.of(row).elastic if row is not None else None
            if row is None or elastic is None:
                continue
            replicas = elastic.replicas_of(row["cpus"])
            if self.store.start_resize(resize.job_id, replicas, resize.replicas, resize.cause, now):
                self.effects.runs.resize(resize.job_id, resize.replicas, elastic.grace_s)
                log.info("job %s resized: %s", resize.job_id, resize.cause)


__all__ = ["PassStarts"]
