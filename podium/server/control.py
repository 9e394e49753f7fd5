"""Changes users and administrators ask for: cancel, hold and release jobs (theirs
only, unless admin); drain and resume the node or a GPU, and inject faults (admin,
or the job's owner for a hang or kill of their own job).

Callers hold the reactor's lock.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

from podium.api.caller import Caller, user_name
from podium.api.selection import JobFilter, Selection
from podium.api.states import PreemptMode
from podium.api.times import format_duration
from podium.errors import NotFound, PermissionDenied, SpecError
from podium.jobspec.job import JobState
from podium.recover.agent import HealthAgent
from podium.recover.ladder import Health, Label
from podium.run.executor import LocalExecutor
from podium.server.job_rows import display_id
from podium.server.reactor import Reactor
from podium.store.db import Row
from podium.store.mig_layouts import MigLayouts

PENDING, RUNNING = JobState.PENDING.value, JobState.RUNNING.value
ACTIVE = (PENDING, RUNNING)


class Control:
    """Job and node changes on one embedded cluster."""

    def __init__(
        self,
        reactor: Reactor,
        executor: LocalExecutor,
        agent: Callable[[], HealthAgent | None],
        mig_plans: MigLayouts | None = None,
    ) -> None:
        self.reactor = reactor
        self.mig_plans = mig_plans
        self.store = reactor.store
        self.executor = executor
        self.agent = agent
        self.owner_uid = os.geteuid()

    def require_admin(self, who: Caller, what: str) -> None:
        if not who.is_admin:
            owner = user_name(self.owner_uid)
            admins = "root" if owner == "root" else f"{owner} or root"
            raise PermissionDenied(
                f"{what} is for the administrator ({admins}); you are {who.name}"
            )

    def select(
        self, who: Caller, selection: Selection, allowed_states: tuple[str, ...] = ACTIVE
    ) -> list[Row]:
        """The jobs `selection` names (ids, array tasks, or --user/--name/--state
        filters, those among `allowed_states`), refused whole when any belongs to
        someone else and the caller is no admin. A task named alone that is still
        pending in its array's row is given a row of its own first (as Slurm splits
        it), after its owner is checked."""
        job_ids, tasks = selection.job_ids, selection.tasks
        user, name, states = selection.user, selection.name, selection.states
        if user is not None and user != who.name and not who.is_admin:
            raise PermissionDenied(f"you are {who.name}: you may act only on your own jobs")
        if job_ids or tasks:
            rows = self.store.jobs_by_ids(job_ids) if job_ids else []
            found = {r["job_id"] for r in rows} | {r["array_job_id"] for r in rows}
            missing = [j for j in job_ids if j not in found]
            if missing:
                raise NotFound(f"no job {missing[0]}")
            rows += self._task_rows(who, tasks)
        else:
            if user is None and name is None and states is None:
                raise SpecError("name jobs by id, or select them with --user, --name or --state")
            if not who.is_admin and user is None:
                user = who.name
            rows = self.store.jobs(JobFilter(states=allowed_states, user=user, name=name))
        picked = [
            r
            for r in rows
            if (user is None or r["user"] == user)
            and (name is None or r["name"] == name)
            and (states is None or r["state"] in states)
        ]
        self._own(who, picked)
        return picked

    @staticmethod
    def _own(who: Caller, rows: list[Row]) -> None:
        """Refuse when any of `rows` is someone else's and the caller is no admin."""
        foreign = [r for r in rows if r["uid"] != who.uid and not who.is_admin]
        if foreign:
            r = foreign[0]
            raise PermissionDenied(
                f"job {display_id(r)} belongs to {r['user']}; you may act only on your own jobs"
            )

    def _task_rows(self, who: Caller, tasks: Sequence[tuple[int, int]]) -> list[Row]:
        """The rows of array tasks named alone: a task's own row, or, for one still
        pending in its array's row, a row split off for it (its owner checked first);
        the array's row itself when the array has ended with the task in it."""
        rows = []
        for array_id, index in tasks:
            row = self.store.task_row(array_id, index)
            if row["array_task_id"] != index and row["state"] == PENDING:
                self._own(who, [row])
                (task_id,) = self.store.split_tasks(array_id, 1, self.reactor.clock(), index)
                row = self.store.job(task_id)
            rows.append(row)
        return rows

    def cancel(self, who: Caller, selection: Selection) -> list[int]:
        """Cancel pending jobs at once and ask supervisors to stop running ones."""
        rows = self.select(who, selection)
        now = self.reactor.clock()
        pending = [r["job_id"] for r in rows if r["state"] == PENDING]
        done = self.store.cancel_pending(pending, now)
        for r in rows:
            if r["state"] == RUNNING:
                self.reactor.request_cancel(r["job_id"])
                done.append(r["job_id"])
        return sorted(done)

    def requeue(self, who: Caller, selection: Selection) -> list[int]:
        """Stop running jobs and queue them again with the same id and a raised restart
        count, as `scontrol requeue` does (a job that said --no-requeue is refused)."""
        rows = self.select(who, selection)
        done = []
        for r in rows:
            if r["state"] != RUNNING:
                raise SpecError(
                    f"job {display_id(r)} is {_state_words(r)}: only a running job is requeued"
                )
            if not self.reactor.spec(r).requeue:
                raise SpecError(f"job {display_id(r)} was submitted with --no-requeue")
        for r in rows:
            self.store.set_preempt_mode(r["job_id"], PreemptMode.REQUEUE)
            self.store.event(
                self.reactor.clock(), "requeue", job_id=r["job_id"], detail=f"asked by {who.name}"
            )
            self.reactor.effects.runs.requeue(r["job_id"])
            done.append(r["job_id"])
        return sorted(done)

    def checkpoint(self, who: Caller, job_id: int, step: int) -> dict[str, Any]:
        """A running job says it finished a checkpoint at `step` (`podium checkpoint`):
        preemption and shrinking count its lost work from now (its own user or an
        admin only). A job being stopped (preempted, requeued, resized) is stopped at
        once, without waiting out its grace."""
        row = self._own_running(who, job_id, "checkpoints")
        now = self.reactor.clock()
        self.reactor.reported[job_id] = now
        self.store.event(now, "checkpoint", job_id=job_id, detail=f"step {step}")
        stopping = row["preempt_mode"] is not None
        if stopping:  # saved in its grace: requeued at once, nothing lost
            self.reactor.effects.runs.saved(job_id, step)
        return {"job_id": job_id, "step": step, "time": now, "stopping": stopping}

    def progress(self, who: Caller, job_id: int, done: float, total: float) -> dict[str, Any]:
        """A running job says it has done `done` of `total` units of its work (`podium
        progress`; its own user or an admin only): the forecast ends it where its rate
        says, when that is before its time limit (podium.api.progress)."""
        if done > total:
            raise SpecError(
                f"progress {done:g} of {total:g}: the work done cannot exceed the total "
                "(give DONE --of TOTAL with DONE <= TOTAL)"
            )
        row = self._own_running(who, job_id, "progress")
        now = self.reactor.clock()
        got = self.reactor.progress.report(job_id, row["start_time"] or now, done, total, now)
        start, limit = row["start_time"], row["time_limit_s"]
        limit_end = None if limit is None or start is None else start + limit
        return {"job_id": job_id, **got.record(), "limit_end": limit_end}

    def _own_running(self, who: Caller, job_id: int, reports: str) -> Row:
        """Job `job_id`'s row, when `who` may act on it and it is running (what a job
        reports of itself, `reports`, is only a running job's)."""
        row = self.store.job(job_id)
        self._own(who, [row])
        if row["state"] != RUNNING:
            raise SpecError(
                f"job {display_id(row)} is {_state_words(row)}: only a running job reports "
                f"{reports}"
            )
        return row

    def send_signal(self, who: Caller, selection: Selection, sig: int, scope: str) -> list[int]:
        """`scancel --signal=SIG [-b|-f]`: `sig` to the selected running jobs' steps,
        batch shell or every process (`scope`); a job that is not running is refused,
        as Slurm refuses it."""
        rows = self.select(who, selection)
        idle = [r for r in rows if r["state"] != RUNNING]
        if idle:
            raise SpecError(
                f"job {display_id(idle[0])} is {_state_words(idle[0])}: only a running job "
                "gets a signal"
            )
        done = []
        for r in rows:
            if self.reactor.effects.runs.send_signal(r["job_id"], sig, scope):
                done.append(r["job_id"])
                self.store.event(
                    self.reactor.clock(),
                    "signal",
                    job_id=r["job_id"],
                    detail=f"signal {sig} to {scope}, by {who.name}",
                )
        return sorted(done)

    def set_time_limit(self, who: Caller, job_id: int, seconds: int | None) -> list[int]:
        """`scontrol update JobId=N TimeLimit=...` (every task, for an array's id): a
        pending or running job's owner may lower its limit, an administrator may also
        raise it (Slurm's rule); never past its partition's maximum. A running job's
        supervisor takes the new limit at once (its --signal then comes ahead of the
        new end). The ids changed."""
        rows = self.select(who, Selection((job_id,)))
        live = [r for r in rows if r["state"] in (PENDING, RUNNING)]
        if not live:
            raise SpecError(
                f"job {display_id(rows[0])} is {_state_words(rows[0])}: only a pending or "
                "running job's limit changes"
            )
        caps = {p.name: p.max_time_s for p in self.reactor.config.partitions}
        for r in live:
            old = r["time_limit_s"]
            raising = (seconds is None) if old is not None else False
            raising = raising or (old is not None and seconds is not None and seconds > old)
            if raising and not who.is_admin:
                raise PermissionDenied(
                    f"only an administrator may raise job {display_id(r)}'s time limit "
                    f"(from {_limit(old)} to {_limit(seconds)}); you may lower it"
                )
            cap = caps.get(r["partition"])
            if cap is not None and (seconds is None or seconds > cap):
                raise SpecError(
                    f"{_limit(seconds)} is over partition {r['partition']}'s max time "
                    f"{_limit(cap)}: ask for at most that"
                )
        done = []
        now = self.reactor.clock()
        for r in live:
            if self.store.set_time_limit(r["job_id"], seconds, who.name, now):
                done.append(r["job_id"])
                if r["state"] == RUNNING:
                    self.executor.set_time_limit(r["job_id"], seconds)
        self.reactor.wake()
        return done

    def set_nice(self, who: Caller, job_id: int, nice: int) -> list[int]:
        """`scontrol update JobId=N Nice=V` (every pending task, for an array's id): its
        owner may raise the nice value (lowering its priority), an administrator may
        also lower it, down to -10000 (Slurm's rule and range). The ids changed."""
        if not -10000 <= nice <= 10000:
            raise SpecError(f"Nice={nice}: give a value from -10000 to 10000")
        rows = self.select(who, Selection((job_id,)))
        waiting = [r for r in rows if r["state"] == PENDING]
        if not waiting:
            raise SpecError(
                f"job {display_id(rows[0])} is {_state_words(rows[0])}: only a pending job's "
                "nice value changes (it orders the queue)"
            )
        for r in waiting:
            if nice < r["nice"] and not who.is_admin:
                raise PermissionDenied(
                    f"only an administrator may lower job {display_id(r)}'s nice value (from "
                    f"{r['nice']} to {nice}: a higher priority); you may raise it"
                )
        now = self.reactor.clock()
        done = [
            r["job_id"] for r in waiting if self.store.set_nice(r["job_id"], nice, who.name, now)
        ]
        self.reactor.wake()
        return done

    def hold(self, who: Caller, selection: Selection, held: bool) -> list[int]:
        """Hold (`held`) or release the selected pending jobs; the ids changed. As in
        Slurm, an administrator's hold of another user's job is an admin hold
        (JobHeldAdmin), which only an administrator releases."""
        rows = [r for r in self.select(who, selection) if r["state"] == PENDING]
        if not held and not who.is_admin:
            locked = [r for r in rows if r["held"] == 2]
            if locked:
                raise PermissionDenied(
                    f"job {display_id(locked[0])} was held by an administrator "
                    "(JobHeldAdmin): only an administrator releases it"
                )
        now = self.reactor.clock()
        done: list[int] = []
        for admin_hold in (False, True):
            part = [
                r["job_id"] for r in rows if (who.is_admin and r["uid"] != who.uid) == admin_hold
            ]
            if part:
                done += self.store.set_held(part, held, now, by_admin=admin_hold)
        return sorted(done)

    def drain(self, who: Caller, node: str, reason: str) -> None:
        self.require_admin(who, "draining a node")
        self.store.node(node)
        if not reason.strip():
            raise SpecError("a drain needs a reason: podium drain NODE --reason TEXT")
        self.store.set_node_state(node, "drain", reason.strip(), who.uid, self.reactor.clock())
        self.reactor.wake()  # what the forecast and the next pass read has changed

    def resume(self, who: Caller, node: str, gpu: int | None = None) -> None:
        """Return a node (an admin's drain and whatever health fenced on it), or one GPU
        the health agent fenced, to service: the admin vouches for the hardware."""
        self.require_admin(who, "resuming a node")
        drained = self.store.node(node)["admin_state"] == "drain"
        now = self.reactor.clock()
        health = self.reactor.health
        fenced = [
            h
            for h in health.all(node)
            if h.label is not Label.SCHEDULABLE and (gpu is None or h.gpu == gpu)
        ]
        gpus = self.reactor.node.gpus
        if gpu is not None and gpu not in {g.index for g in gpus}:
            raise SpecError(f"node {node} has no GPU {gpu} (it has 0-{len(gpus) - 1})")
        if not fenced and not (drained and gpu is None):
            what = f"GPU {gpu} of node {node}" if gpu is not None else f"node {node}"
            raise SpecError(f"{what} is neither drained nor fenced: nothing to resume")
        for h in fenced:
            health.put(
                Health(h.node, h.gpu, deep=h.deep), now, f"resumed by {who.name} (was {h.label})"
            )
        if drained and gpu is None:
            self.store.set_node_state(node, "up", None, who.uid, now)
        if self.mig_plans is not None:  # resumed as it is: a planned MIG layout is moot
            for g in [gpu] if gpu is not None else [g.index for g in gpus]:
                self.mig_plans.drop_plan(node, g)
        self.reactor.wake()

    def inject(self, who: Caller, kind: str, job_id: int, rank: int) -> int:
        """Fault injection into a running job: SIGSTOP (hang) or SIGKILL (kill) to one
        rank. For the job's owner or an admin. Returns the rank's pid."""
        row = self.store.job(job_id)
        if row["uid"] != who.uid and not who.is_admin:
            raise PermissionDenied(f"job {display_id(row)} belongs to {row['user']}")
        if row["state"] != RUNNING:
            raise SpecError(
                f"job {display_id(row)} is {_state_words(row)}: only a running job can be hit"
            )
        pids = self.executor.task_pids(job_id)
        if rank not in pids:
            ranks = f"0-{len(pids) - 1}" if pids else "none started yet"
            raise SpecError(f"job {job_id} has no rank {rank} (ranks: {ranks})")
        sig = signal.SIGSTOP if kind == "hang" else signal.SIGKILL
        try:
            os.kill(pids[rank], sig)
        except ProcessLookupError:
            raise SpecError(f"rank {rank} of job {job_id} has already exited") from None
        self.store.event(
            self.reactor.clock(), "inject", job_id=job_id, detail=f"{kind} rank {rank}"
        )
        return pids[rank]

    def inject_xid(self, who: Caller, gpu: int, code: int) -> str:
        """Write an Xid for `gpu` where the health agent reads (admin only: the agent
        fences what it reads). Returns where it was written."""
        self.require_admin(who, "injecting an Xid")
        agent = self.agent()
        if agent is None:
            raise SpecError("this daemon runs no health agent")
        try:
            return agent.write_xid(gpu, code)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        except OSError as exc:
            raise SpecError(f"cannot write the Xid: {exc.strerror}: {exc.filename}") from None


def _limit(seconds: int | None) -> str:
    return "UNLIMITED" if seconds is None else format_duration(seconds)


def _state_words(row: Row) -> str:
    """A job's state as a sentence says it: "pending", "completed", "held"."""
    if row["state"] == PENDING and row["held"]:
        return "held"
    return str(row["state"]).lower()
