"""The daemon loop's rounds between requests: collect ended runs, stop idle MPS
servers, sample GPU memory and running jobs' newest checkpoints, let the health agent
look, and run a scheduling pass when one is due. Runs on a worker thread; takes the
reactor's lock only where it reads or changes shared state."""

from __future__ import annotations

from collections.abc import Callable

from podium.node.gpu_memory import accounted_memory, by_job, process_memory
from podium.recover.agent import HealthAgent
from podium.recover.resume import newest_checkpoint
from podium.run.executor import LocalExecutor
from podium.server.job_rows import held_units
from podium.server.reactor import Reactor
from podium.store.brief import Row, brief


def _world(row: Row) -> int | None:
    """A running job's ranks, when fixed (an elastic job's change with its size)."""
    shown = brief(row)
    return None if shown.get("elastic") else int(shown.get("ntasks") or 1)


class Housekeeping:
    """One embedded cluster's loop work. `agent` gives the node's health agent, if one
    is attached; `real_gpus` says whether NVML can be asked for GPU memory."""

    def __init__(
        self,
        reactor: Reactor,
        executor: LocalExecutor,
        agent: Callable[[], HealthAgent | None],
        real_gpus: bool,
    ) -> None:
        self.reactor = reactor
        self.executor = executor
        self.agent = agent
        self.real_gpus = real_gpus
        self._next_memory_sample = 0.0
        self._next_checkpoint_sample = 0.0
        self._runs_over: list[tuple[int, list[int], float, float]] = []  # on whole GPUs
        if real_gpus:
            reactor.ends.run_over_hooks.append(self._note_run_over)

    def cycle(self) -> float:
        """Collect ended runs, let the health agent look, and run a pass when one is
        due. Returns how long until a pass is due (the loop also wakes on changes)."""
        reactor = self.reactor
        reactor.collect()
        if reactor.planner.mps.live:
            self.stop_idle_mps()
        if reactor.clock() >= self._next_checkpoint_sample:
            self._next_checkpoint_sample = reactor.clock() + reactor.config.health.interval_s
            self.sample_checkpoints()
            self.sample_ranks()
        if self.real_gpus and reactor.clock() >= self._next_memory_sample:
            self._next_memory_sample = reactor.clock() + reactor.config.health.gpu_memory_sample_s
            self.sample_gpu_memory()
        agent = self.agent()
        if agent is not None:
            with reactor.lock:
                agent.tick()
        if reactor.pass_due() == 0.0:
            reactor.run_pass()
        return reactor.pass_due()

    def _note_run_over(self, job_id: int, units: list[int], start: float, end: float) -> None:
        """A run on whole GPUs is over (told by the reactor's Ends, under its lock): its
        processes' memory is asked of NVML's accounting at the next sample."""
        whole = {d.index for d in self.reactor.node.devices if not d.kind}
        if set(units) <= whole:
            self._runs_over.append((job_id, units, start, end))

    def sample_gpu_memory(self) -> None:
        """Raise each running job's GPU memory high-water mark to what its processes
        hold now, as NVML reports them, and, for each run on whole GPUs that ended
        since the last sample, to what NVML's accounting kept of its processes
        (podium.node.gpu_memory): a job shorter than the sampling interval has one too."""
        reactor = self.reactor
        used = process_memory()  # outside the lock: NVML is asked first
        with reactor.lock:
            over, self._runs_over = self._runs_over, []
            running = [r["job_id"] for r in reactor.running_rows()] if used else []
        peaks: dict[int, int] = {}
        if used:
            sessions = {s: j for j in running if (s := self.executor.session(j)) is not None}
            peaks = by_job(used, sessions)
        for job_id, gpus, start, end in over:
            if (mib := accounted_memory(gpus, start, end)) is not None and mib > 0:
                peaks[job_id] = max(peaks.get(job_id, 0), mib)
        reactor.store.raise_gpu_memory(peaks)

    def sample_checkpoints(self) -> None:
        """Note each running job's newest checkpoint (a file in its
        PODIUM_CHECKPOINT_DIR, as auto-resume reads them): preemption stops the jobs
        that lose the least work since theirs (podium.sched.preempt), and a newer one
        than the last sample is a `checkpoint` event in the job's timeline, at the
        file's time (`podium show`, the dashboard). Every `health.interval_s`; the
        directories are walked outside the lock, 10,000 entries at most each."""
        reactor = self.reactor
        with reactor.lock:
            rows = reactor.running_rows()
            dirs = {r["job_id"]: reactor.planner.checkpoint_dir(r["job_id"], reactor.spec(r))
                    for r in rows}  # fmt: skip
            started = {r["job_id"]: r["start_time"] or 0.0 for r in rows}
        found = {job_id: newest_checkpoint(path) for job_id, path in dirs.items()}
        with reactor.lock:
            for job_id, t in sorted(found.items()):
                before = reactor.checkpoints.get(job_id, 0.0)
                if t is not None and t > before and t >= started[job_id]:
                    reactor.store.event(
                        t, "checkpoint", job_id=job_id,
                        detail="saved (a newer file in PODIUM_CHECKPOINT_DIR)",
                    )  # fmt: skip
            reactor.checkpoints = {j: t for j, t in found.items() if t is not None}
            reactor.reported = {j: t for j, t in reactor.reported.items() if j in dirs}
            reactor.progress.keep(dirs)

    def sample_ranks(self) -> None:
        """Look at what each running job's ranks said of their steps (read outside the
        lock): podium_rank_step_seconds, and stragglers (podium.server.rank_watch)."""
        reactor = self.reactor
        with reactor.lock:
            jobs = [(r["job_id"], _world(r)) for r in reactor.running_rows()]
        runs = reactor.effects.runs
        said = {job_id: runs.rank_seconds(job_id, world) for job_id, world in jobs}
        replaced = {job_id: len(runs.replacements(job_id)) for job_id in said if said[job_id]}
        with reactor.lock:
            reactor.ranks.look(said, replaced)

    def stop_idle_mps(self) -> None:
        """Stop the MPS control daemons whose GPU has no running MPS job of their user
        left (podium.node.mps)."""
        node = self.reactor.node
        units = {d.index: d.physical for d in node.devices if d.kind == "mps"}
        with self.reactor.lock:
            rows = self.reactor.running_rows()
        in_use = {(units[g], r["uid"]) for r in rows for g in held_units(r) if g in units}
        self.reactor.planner.mps.stop_idle(in_use)
