"""The daemon's core: accepts requests, runs scheduling passes, tracks jobs to the end.

All methods run on the daemon's event-loop thread; the store is used from there only.
Data flows one way: request -> store -> sched.schedule (pure) -> executor -> store.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from podium.api.text import printable
from podium.errors import NotFound, PermissionDenied, SpecError, StoreError
from podium.node.inventory import GpuInfo, device_number, node_cpu_ids
from podium.recover.agent import HealthAgent
from podium.recover.ladder import Health, Label
from podium.recover.resume import Ended, decide, newest_checkpoint
from podium.run.bpfdev import Device
from podium.run.executor import LocalExecutor
from podium.run.identity import DirCheckError, Identity, check_dirs_as_user
from podium.run.patterns import expand
from podium.run.plan import LaunchPlan, TaskPlan
from podium.sched import (
    Allocation,
    Decisions,
    GpuSlot,
    NodeView,
    PendingJob,
    Snapshot,
    Start,
    schedule,
)
from podium.sched.fairshare import Association, fairshare_table, user_factors
from podium.sched.model import Reason
from podium.server.policy import half_life_s, policy_from_config, share_tree
from podium.server.records import job_record
from podium.spec.build import SubmitRequest, Submitter, build_job
from podium.spec.cluster import ClusterConfig
from podium.spec.job import JobSpec, JobState
from podium.store.db import Row, RunningStart, Store, spec_of
from podium.store.health import HealthTable

log = logging.getLogger("podium.controller")

ACTIVE = (JobState.PENDING.value, JobState.RUNNING.value)


@dataclass(frozen=True)
class Caller:
    """Who is calling, from the socket's peer credentials."""

    uid: int
    gid: int
    name: str
    is_admin: bool


def group_names(who: Caller) -> tuple[str, ...]:
    """The names of every Unix group `who` belongs to (primary and supplementary)."""
    try:
        gids = os.getgrouplist(who.name, who.gid)
    except (KeyError, OSError):
        gids = [who.gid]
    names = []
    for gid in gids:
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.append(str(gid))
    return tuple(names)


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Controller:
    """Owns the store, the executor and the scheduling passes of one embedded cluster."""

    def __init__(
        self,
        home: Path,
        config: ClusterConfig,
        store: Store,
        executor: LocalExecutor,
        gpus: list[GpuInfo],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.home = home
        self.config = config
        self.store = store
        self.executor = executor
        self.gpus = gpus
        self.clock = clock
        self.owner_uid = os.geteuid()
        self._specs: dict[int, JobSpec] = {}
        self._cancel_requested: set[int] = set()
        self._unreadable: set[int] = set()  # pending jobs whose stored spec cannot be read
        self._reserve_retry = 0.0  # when to try again to keep the state disk's reserve
        self._killing: set[int] = set()  # ended jobs whose leftover processes are being killed
        self.policy = policy_from_config(config)
        self.half_life_s = half_life_s(config)
        self.last: Decisions | None = None
        self.node_name = config.node.name
        self.gpu_groups: tuple[tuple[int, ...], ...] = ()
        self.cpu_ids = node_cpu_ids(config.node.cpus)  # None: CPUs counted, not given by id
        self.gpu_devices = {g.index: device_number(g.device) for g in gpus}
        self.denied_everywhere: tuple[Device, ...] = ()  # devices no job may open
        self.hide_gpus = False  # jobs get an empty CUDA_VISIBLE_DEVICES (declared on real)
        self.gpu_note: str | None = None  # what users should know about the GPUs
        self.cgroup_v2_base: str | None = None  # set by the daemon when it prepared one
        self.enforcement: dict[str, str] = {}  # resource -> enforced or accounted, and how
        self.health = HealthTable(store)
        self.agent: HealthAgent | None = None  # set by the daemon
        self._faulted: dict[int, tuple[str, int | None]] = {}  # job -> (reason, bad GPU)
        store.ensure_node(self.node_name)

    # --- identity ----------------------------------------------------------------

    def caller(self, uid: int, gid: int) -> Caller:
        return Caller(uid, gid, user_name(uid), uid in (0, self.owner_uid))

    def _require_admin(self, who: Caller, what: str) -> None:
        if not who.is_admin:
            raise PermissionDenied(
                f"{what} is for the administrator ({user_name(self.owner_uid)} or root); "
                f"you are {who.name}"
            )

    # --- submit ------------------------------------------------------------------

    def submit(self, req: SubmitRequest, who: Caller) -> list[dict[str, Any]]:
        """Validate and commit a job (all tasks of an array); return their records.

        Nothing is stored when the request is invalid or `test_only` is set.
        """
        if self.store.reserve_released:
            raise StoreError(
                f"the state disk is full: submissions are refused until there is room on the "
                f"filesystem of {self.home} (what is left records running jobs' outcomes)"
            )
        if self.owner_uid != 0 and who.uid != self.owner_uid:
            raise PermissionDenied(
                f"this daemon runs as {user_name(self.owner_uid)} and can run jobs only for "
                f"that user; start it as root to serve several users"
            )
        now = self.clock()
        if req.idempotency_key is not None and not req.test_only:
            earlier = self.store.submitted(who.uid, req.idempotency_key)
            if earlier is not None:  # a retry of a submission that was committed
                return [job_record(r, now) for r in self.store.jobs_by_ids(earlier)]
        built = build_job(
            req,
            self.config,
            Submitter(
                who.uid,
                who.gid,
                who.name,
                who.is_admin,
                group_names(who) if self.config.names_groups else (),
            ),
            now,
        )
        spec = built.spec
        if built.enter_dirs or built.write_dirs:
            try:
                check_dirs_as_user(
                    self._identity(who.uid, who.gid, who.name, spec.umask),
                    enter=built.enter_dirs,
                    write=built.write_dirs,
                )
            except DirCheckError as exc:
                raise SpecError(f"the job's directories: {exc}") from None
        self._check_submit_limit(spec, who)
        dep_ids = {j for d in spec.dependencies for j in d.job_ids}
        if dep_ids:
            known = set(self.store.states_of(dep_ids)) | set(self.store.array_members(dep_ids))
            missing = sorted(dep_ids - known)
            if missing:
                raise SpecError(
                    f"{built.dependency_where}: --dependency: no job {missing[0]} "
                    "(dependencies must name submitted jobs)"
                )
        if req.test_only:
            return [
                {
                    "job_id": None,
                    "name": spec.name,
                    "state": "WOULD_QUEUE",
                    "gpus": spec.gpus,
                    "cpus": spec.cpus,
                    "mem_mb": spec.mem_mb,
                    "partition": spec.partition,
                    "qos": spec.qos,
                    "time_limit_s": spec.time_limit_s,
                    "array_tasks": len(spec.array.indices) if spec.array else None,
                }
            ]
        ids = self.store.insert_jobs(
            spec,
            uid=who.uid,
            gid=who.gid,
            user=who.name,
            now=now,
            idempotency_key=req.idempotency_key,
        )
        for job_id in ids:
            self._specs[job_id] = spec
        return [job_record(r, now) for r in self.store.jobs_by_ids(ids)]

    def _identity(self, uid: int, gid: int, user: str, umask: int) -> Identity:
        """The identity a job of this user runs with. A daemon that is not root runs
        everything as itself (it serves only its owner)."""
        if self.owner_uid != 0:
            return Identity(self.owner_uid, os.getegid(), tuple(os.getgroups()), umask)
        return Identity.of(uid, gid, user, umask)

    def _check_submit_limit(self, spec: JobSpec, who: Caller) -> None:
        """Refuse a submission over its QoS's max_submit_jobs_per_user."""
        level = self.config.qos_level(spec.qos)
        cap = level.max_submit_jobs_per_user if level else None
        if cap is None:
            return
        active = len(self.store.jobs(states=ACTIVE, user=who.name, qos=spec.qos))
        adding = len(spec.array.indices) if spec.array else 1
        if active + adding > cap:
            raise SpecError(
                f"QOSMaxSubmitJobPerUserLimit: QoS {spec.qos} allows {cap} queued or running "
                f"jobs per user; you have {active} and this adds {adding}"
            )

    # --- queries -----------------------------------------------------------------

    def list_jobs(
        self,
        *,
        states: Iterable[str] | None = None,
        user: str | None = None,
        name: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[dict[str, Any]]:
        now = self.clock()
        rows = self.store.jobs(states=states, user=user, name=name, since=since, until=until)
        return [job_record(r, now) for r in rows]

    def show(self, job_id: int, who: Caller) -> dict[str, Any]:
        """One job in full, its script and events included: for its user and admins."""
        now = self.clock()
        row = self.store.job(job_id)
        if row["uid"] != who.uid and not who.is_admin:
            raise PermissionDenied(
                f"job {job_id} belongs to {row['user']}: its details and output are for "
                "that user and the administrators (podium queue lists every job)"
            )
        record = job_record(row, now)
        try:
            spec = spec_of(row)
            record["script"] = spec.script
            record["spec"] = spec.model_dump(mode="json", exclude={"environment", "script"})
        except ValueError as exc:  # pydantic's ValidationError included
            record["script"] = None
            record["spec"] = {"error": printable(f"unreadable: {exc}")[:300]}
        record["events"] = [
            {"time": e["time"], "kind": e["kind"], "detail": e["detail"]}
            for e in self.store.events(job_id)
        ]
        return record

    def nodes(self) -> list[dict[str, Any]]:
        running = self.store.jobs(states=[JobState.RUNNING.value])
        owner = gpu_owners(running)
        cpus_alloc = sum(r["cpus"] for r in running)
        mem_alloc = sum(r["mem_mb"] for r in running)
        node_row = self.store.node(self.node_name)
        used = len(owner)
        total = len(self.gpus)
        health = {h.gpu: h for h in self.health.all(self.node_name)}
        node_health = health.get(None, Health(self.node_name, None))
        reason = node_row["reason"]
        if node_row["admin_state"] == "drain" or node_health.fenced:
            state = "draining" if running else "drained"
            if node_row["admin_state"] != "drain":
                reason = node_health.reason
        elif not running:
            state = "idle"
        elif (total and used == total) or cpus_alloc >= self.config.node.cpus:
            state = "allocated"
        else:
            state = "mixed"
        return [
            {
                "node": self.node_name,
                "state": state,
                "reason": reason,
                "health": _health_json(node_health, self.config.health.recovery),
                "agent": self._agent_state(),
                "cpus_total": self.config.node.cpus,
                "cpus_alloc": cpus_alloc,
                "mem_total_mb": self.config.node.memory_mb,
                "mem_alloc_mb": mem_alloc,
                "gpus_total": total,
                "gpus_used": used,
                "gpu_type": self.gpus[0].type if self.gpus else None,
                "gpu_note": self.gpu_note,
                "features": self.config.node.features,
                "enforcement": self.enforcement,
                "partitions": [p.name for p in self.config.partitions],
                "gpus": [
                    {
                        "index": g.index,
                        "type": g.type,
                        "memory_mb": g.memory_mb,
                        "uuid": g.uuid,
                        "bus_id": g.bus_id,
                        "job_id": owner.get(g.index),
                        "health": _health_json(
                            health.get(g.index, Health(self.node_name, g.index)),
                            self.config.health.recovery,
                        ),
                    }
                    for g in self.gpus
                ],
            }
        ]

    # --- changes -----------------------------------------------------------------

    def _select(
        self,
        who: Caller,
        job_ids: list[int],
        user: str | None,
        name: str | None,
        states: list[str] | None,
        allowed_states: tuple[str, ...],
    ) -> list[Row]:
        if user is not None and user != who.name and not who.is_admin:
            raise PermissionDenied(f"you are {who.name}: you may act only on your own jobs")
        if job_ids:
            rows = self.store.jobs_by_ids(job_ids)
            found = {r["job_id"] for r in rows} | {r["array_job_id"] for r in rows}
            missing = [j for j in job_ids if j not in found]
            if missing:
                raise NotFound(f"no job {missing[0]}")
        else:
            if user is None and name is None and states is None:
                raise SpecError("name jobs by id, or select them with --user, --name or --state")
            rows = self.store.jobs(states=allowed_states)
            if not who.is_admin and user is None:
                user = who.name
        picked = [
            r
            for r in rows
            if (user is None or r["user"] == user)
            and (name is None or r["name"] == name)
            and (states is None or r["state"] in states)
        ]
        foreign = [r for r in picked if r["uid"] != who.uid and not who.is_admin]
        if foreign:
            r = foreign[0]
            raise PermissionDenied(
                f"job {r['job_id']} belongs to {r['user']}; you may act only on your own jobs"
            )
        return picked

    def cancel(
        self,
        who: Caller,
        job_ids: list[int],
        user: str | None = None,
        name: str | None = None,
        states: list[str] | None = None,
    ) -> list[int]:
        """Cancel pending jobs at once and ask supervisors to stop running ones."""
        rows = self._select(who, job_ids, user, name, states, ACTIVE)
        now = self.clock()
        pending = [r["job_id"] for r in rows if r["state"] == JobState.PENDING.value]
        done = self.store.cancel_pending(pending, now)
        for r in rows:
            if r["state"] == JobState.RUNNING.value:
                self._cancel_requested.add(r["job_id"])
                self.executor.cancel(r["job_id"])
                done.append(r["job_id"])
        return sorted(done)

    def hold(self, who: Caller, job_ids: list[int], held: bool) -> list[int]:
        rows = self._select(who, job_ids, None, None, None, ACTIVE)
        return self.store.set_held(
            [r["job_id"] for r in rows if r["state"] == JobState.PENDING.value], held, self.clock()
        )

    def drain(self, who: Caller, node: str, reason: str) -> dict[str, Any]:
        self._require_admin(who, "draining a node")
        self.store.node(node)
        if not reason.strip():
            raise SpecError("a drain needs a reason: podium drain NODE --reason TEXT")
        self.store.set_node_state(node, "drain", reason.strip(), who.uid, self.clock())
        return self.nodes()[0]

    def resume(self, who: Caller, node: str, gpu: int | None = None) -> dict[str, Any]:
        """Return a node (an admin's drain and whatever health fenced on it), or one GPU
        the health agent fenced, to service: the admin vouches for the hardware."""
        self._require_admin(who, "resuming a node")
        drained = self.store.node(node)["admin_state"] == "drain"
        now = self.clock()
        fenced = [
            h
            for h in self.health.all(node)
            if h.label is not Label.SCHEDULABLE and (gpu is None or h.gpu == gpu)
        ]
        if gpu is not None and gpu not in {g.index for g in self.gpus}:
            raise SpecError(f"node {node} has no GPU {gpu} (it has 0-{len(self.gpus) - 1})")
        if not fenced and not (drained and gpu is None):
            what = f"GPU {gpu} of node {node}" if gpu is not None else f"node {node}"
            raise SpecError(f"{what} is neither drained nor fenced: nothing to resume")
        for h in fenced:
            self.health.put(
                Health(h.node, h.gpu, deep=h.deep), now, f"resumed by {who.name} (was {h.label})"
            )
        if drained and gpu is None:
            self.store.set_node_state(node, "up", None, who.uid, now)
        return self.nodes()[0]

    def inject(self, who: Caller, kind: str, job_id: int, rank: int) -> int:
        """Fault injection into a running job: SIGSTOP (hang) or SIGKILL (kill) to one
        rank. For the job's owner or an admin. Returns the rank's pid."""
        row = self.store.job(job_id)
        if row["uid"] != who.uid and not who.is_admin:
            raise PermissionDenied(f"job {job_id} belongs to {row['user']}")
        if row["state"] != JobState.RUNNING.value:
            raise SpecError(f"job {job_id} is {row['state']}: only a running job can be hit")
        pids = self.executor.task_pids(job_id)
        if rank not in pids:
            ranks = f"0-{len(pids) - 1}" if pids else "none started yet"
            raise SpecError(f"job {job_id} has no rank {rank} (ranks: {ranks})")
        sig = signal.SIGSTOP if kind == "hang" else signal.SIGKILL
        try:
            os.kill(pids[rank], sig)
        except ProcessLookupError:
            raise SpecError(f"rank {rank} of job {job_id} has already exited") from None
        self.store.event(self.clock(), "inject", job_id=job_id, detail=f"{kind} rank {rank}")
        return pids[rank]

    def inject_xid(self, who: Caller, gpu: int, code: int) -> str:
        """Write an Xid for `gpu` where the health agent reads (admin only: the agent
        fences what it reads). Returns where it was written."""
        self._require_admin(who, "injecting an Xid")
        if self.agent is None:
            raise SpecError("this daemon runs no health agent")
        try:
            return self.agent.write_xid(gpu, code)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        except OSError as exc:
            raise SpecError(f"cannot write the Xid: {exc.strerror}: {exc.filename}") from None

    # --- what the health agent needs ----------------------------------------------

    def _agent_state(self) -> str:
        if self.agent is None:
            return "off"
        return "deep-check-in-progress" if self.agent.busy_deep() else "watching"

    def gpu_owners(self) -> dict[int, int]:
        """GPU index -> the running job holding it."""
        return gpu_owners(self.store.jobs(states=[JobState.RUNNING.value]))

    def running_job_ids(self) -> list[int]:
        return [r["job_id"] for r in self.store.jobs(states=[JobState.RUNNING.value])]

    def fail_jobs(self, job_ids: list[int], reason: str, gpu: int | None) -> None:
        """Stop jobs whose hardware failed: killed at once, they end NODE_FAIL with
        `reason` (and are requeued avoiding `gpu` if they asked for auto-resume)."""
        for job_id in job_ids:
            if job_id in self._faulted or job_id in self._cancel_requested:
                continue
            self._faulted[job_id] = (reason, gpu)
            if not self.executor.fail(job_id, reason, gpu):
                log.warning("job %s: no supervisor to stop for %s", job_id, reason)
            log.warning("job %s stopped: %s", job_id, reason)

    # --- the loop ------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """After a (re)start: adopt running jobs, record ends that happened meanwhile,
        and put back jobs whose supervisor never started. Returns counts."""
        counts = {"adopted": 0, "ended": 0, "relaunch": 0, "lost": 0}
        for row in self.store.jobs(states=[JobState.RUNNING.value]):
            status = self._collect(row)
            counts[status] = counts.get(status, 0) + 1
        return counts

    def _collect(self, row: Row) -> str:
        """Record how a running job stands. Its GPUs, CPUs and memory stay held until
        none of its processes is left: a job whose supervisor vanished has its
        leftovers killed first, and stays RUNNING while any survives."""
        job_id = row["job_id"]
        poll = self.executor.poll(job_id)
        now = self.clock()
        if poll.status == "running":
            return "adopted"
        if poll.status in ("ended", "vanished"):
            left = self.executor.kill_leftovers(job_id, scan_session=poll.status == "vanished")
            if left:
                if job_id not in self._killing:
                    self._killing.add(job_id)
                    log.warning("job %s: %d leftover process(es) still alive", job_id, left)
                    self.store.event(
                        now, "leftovers", job_id=job_id, detail=f"{left} process(es) alive"
                    )
                return "adopted"
            self._killing.discard(job_id)
        if poll.status == "ended" and poll.result is not None:
            res = poll.result
            self._charge(row, res.end_time)
            mode = row["preempt_mode"] or "requeue"
            if (
                res.state == JobState.PREEMPTED.value
                and mode == "requeue"
                and self._spec(row).requeue
            ):
                self.store.requeue(job_id, now, "preempted")
                self._mail(row, "REQUEUE", "was preempted and requeued")
                return "requeued"
            return self._end_or_resume(
                row, res.state, res.exit_code, res.signal, res.end_time, res.reason, res.fault
            )
        if job_id in self._cancel_requested:
            self.store.mark_ended(
                job_id, state=JobState.CANCELLED, exit_code=None, signal=None, end_time=now
            )
            self._cancel_requested.discard(job_id)
            return "ended"
        if poll.status == "unlaunched":
            self.store.requeue_unlaunched(job_id, now)
            return "relaunch"
        self._end_or_resume(
            row, JobState.NODE_FAIL.value, None, None, now, "supervisor vanished", "node"
        )
        return "lost"

    def _end_or_resume(
        self,
        row: Row,
        state: str,
        exit_code: int | None,
        sig: int | None,
        end_time: float,
        reason: str,
        fault: str | None,
    ) -> str:
        """Record how a run ended; requeue it instead when auto-resume says so.

        A run stopped because its GPU or node was fenced ends NODE_FAIL with the health
        reason; requeued, it avoids that GPU while the GPU is unhealthy.
        """
        job_id = row["job_id"]
        now = self.clock()
        faulted = self._faulted.pop(job_id, None)
        if faulted is None and fault == "node":  # stopped by a daemon that since restarted
            faulted = self.executor.fault_note(job_id)
        if faulted is not None:
            reason, bad_gpu = faulted
            state = JobState.NODE_FAIL.value
        else:
            bad_gpu = None
        if state in (JobState.FAILED.value, JobState.NODE_FAIL.value):
            spec = self._spec(row)
            newest = newest_checkpoint(self._checkpoint_dir(row, spec))
            before = row["checkpoint_mtime"]
            verdict = decide(
                Ended(
                    state=state,
                    exit_code=exit_code,
                    signal=sig,
                    fault=fault is not None or faulted is not None,
                    auto_resume=spec.auto_resume,
                    restart_count=row["restart_count"],
                    requeue_exit_codes=spec.requeue_exit_codes,
                    no_requeue_exit_codes=spec.no_requeue_exit_codes,
                    stalled_restarts=row["stalled_restarts"],
                    progressed=newest is not None and (before is None or newest > before),
                    max_stalled=self.config.resume.max_restarts_without_progress,
                )
            )
            if self.agent is not None and faulted is None:
                self.agent.job_failed(spec_gpu_ids(row))
            if verdict.requeue:
                exclude = [tuple(e) for e in json.loads(row["exclude"] or "[]")]
                if bad_gpu is not None and (row["node"], bad_gpu) not in exclude:
                    exclude.append((row["node"], bad_gpu))
                self.store.requeue(
                    job_id,
                    now,
                    f"{state}: {reason}; {verdict.reason}",
                    exclude=[(str(n), int(g)) for n, g in exclude],
                    checkpoint_mtime=newest,
                    stalled_restarts=verdict.stalled_restarts,
                )
                self._mail(row, "REQUEUE", f"ended {state} and was requeued")
                log.info("job %s %s (%s): requeued, %s", job_id, state, reason, verdict.reason)
                return "requeued"
            if spec.auto_resume > 0:
                reason = f"{reason}; not requeued: {verdict.reason}"
        self.store.mark_ended(
            job_id,
            state=JobState(state),
            exit_code=exit_code,
            signal=sig,
            end_time=end_time,
            reason=reason,
        )
        self._after_end(row, state)
        return "ended"

    def _charge(self, row: Row, end_time: float) -> None:
        """Add a finished run's GPU-seconds (and weighted CPU-seconds) to fair share."""
        if row["start_time"] is None:
            return
        elapsed = max(0.0, end_time - row["start_time"])
        weight = self.config.fairshare.cpu_weight
        amount = elapsed * (len(spec_gpu_ids(row)) + weight * row["cpus"])
        self.store.charge(row["account"], row["user"], amount, end_time, self.half_life_s)

    def _after_end(self, row: Row, state: str) -> None:
        self._cancel_requested.discard(row["job_id"])
        self._specs.pop(row["job_id"], None)
        kind = "END" if state == JobState.COMPLETED.value else "FAIL"
        if state == JobState.TIMEOUT.value:
            kind = "TIME_LIMIT"
        self._mail(row, kind, f"ended {state}")

    def _mail(self, row: Row, kind: str, what: str) -> None:
        spec = self._spec(row)
        if not spec.mail_types or not self.config.mail_command:
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
        who = self._identity(row["uid"], row["gid"], row["user"], spec.umask)
        try:
            # As the job's user, and `--` first: the recipient can never be an option.
            subprocess.Popen(
                [self.config.mail_command, "-s", subject, "--", recipient],
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

    def _spec(self, row: Row) -> JobSpec:
        """The job's spec, parsed once and kept while the job is active."""
        spec = self._specs.get(row["job_id"])
        if spec is None:
            if "spec" not in row.keys():  # noqa: SIM118 (sqlite3.Row: `in` tests values)
                row = self.store.job(row["job_id"])
            spec = spec_of(row)
            self._specs[row["job_id"]] = spec
        return spec

    def snapshot(self) -> Snapshot:
        """The scheduler's view of the cluster now."""
        node_row = self.store.node(self.node_name)
        health = self.health.all(self.node_name)
        fenced = {h.gpu for h in health if h.fenced}
        unhealthy = {(h.node, h.gpu) for h in health if h.label is not Label.SCHEDULABLE}
        view = NodeView(
            name=self.node_name,
            cpus=self.config.node.cpus,
            memory_mb=self.config.node.memory_mb,
            gpus=tuple(GpuSlot(g.index, g.type) for g in self.gpus if g.index not in fenced),
            schedulable=node_row["admin_state"] == "up" and None not in fenced,
            gpu_groups=self.gpu_groups,
        )
        running = []
        for r in self.store.jobs(states=[JobState.RUNNING.value]):
            spec = self._spec(r)
            running.append(
                Allocation(
                    job_id=r["job_id"],
                    node=r["node"] or self.node_name,
                    user=r["user"],
                    gpu_indices=tuple(g for g in spec_gpu_ids(r) if g not in fenced),
                    cpus=r["cpus"],
                    mem_mb=r["mem_mb"],
                    exclusive=spec.exclusive,
                    name=r["name"],
                    array_job_id=r["array_job_id"],
                    qos=r["qos"],
                    account=r["account"],
                    start_time=r["start_time"] or self.clock(),
                    time_limit_s=r["time_limit_s"],
                    preempting=r["preempt_mode"] is not None,
                )
            )
        pending = []
        dep_ids: set[int] = set()
        for r in self.store.pending_brief():
            if r["job_id"] in self._unreadable:
                continue
            try:
                spec = self._spec(r)
            except Exception as exc:
                self._unreadable.add(r["job_id"])  # held and logged once, not every pass
                self._hold_broken(r["job_id"], "unreadable job", exc)
                continue
            qos = self.config.qos_level(r["qos"])
            pending.append(
                PendingJob(
                    job_id=r["job_id"],
                    user=r["user"],
                    name=r["name"],
                    partition=r["partition"],
                    qos_priority=qos.priority if qos else 0,
                    submit_time=r["submit_time"],
                    cpus=r["cpus"],
                    mem_mb=r["mem_mb"],
                    gpus=r["gpus"],
                    gpu_type=spec.gpu_type,
                    exclusive=spec.exclusive,
                    nice=r["nice"],
                    held=bool(r["held"]),
                    begin_time=spec.begin_time,
                    dependencies=spec.dependencies,
                    dependency_any=spec.dependency_any,
                    kill_on_invalid_dep=spec.kill_on_invalid_dep,
                    array_job_id=r["array_job_id"],
                    array_throttle=r["array_throttle"],
                    qos=r["qos"],
                    account=r["account"],
                    time_limit_s=r["time_limit_s"],
                    avoid_gpus=frozenset(
                        (n, g) for n, g in json.loads(r["exclude"] or "[]") if (n, g) in unhealthy
                    ),
                )
            )
            dep_ids.update(j for d in spec.dependencies for j in d.job_ids)
        return Snapshot(
            nodes=(view,),
            running=tuple(running),
            pending=tuple(pending),
            job_states=self.store.states_of(dep_ids),
            array_members=self.store.array_members(dep_ids),
            fairshare=user_factors(*self._share_inputs(running, pending)),
            partition_nodes={p.name: tuple(p.nodes) for p in self.config.partitions if p.nodes},
        )

    def _share_inputs(
        self, running: list[Allocation], pending: list[PendingJob]
    ) -> tuple[Association, dict[tuple[str, str], float]]:
        """The fair-share tree and usage now: decayed stored usage plus what running
        jobs have used so far."""
        now = self.clock()
        usage = self.store.usage(now, self.half_life_s)
        weight = self.config.fairshare.cpu_weight
        for a in running:
            used = max(0.0, now - a.start_time) * (len(a.gpu_indices) + weight * a.cpus)
            usage[(a.account, a.user)] = usage.get((a.account, a.user), 0.0) + used
        seen = set(usage) | {(p.account, p.user) for p in pending}
        return share_tree(self.config, seen), usage

    def share(self) -> list[dict[str, Any]]:
        """Fair share per account and user, like sshare."""
        snap = self.snapshot()
        tree, usage = self._share_inputs(list(snap.running), list(snap.pending))
        return [asdict(r) for r in fairshare_table(tree, usage)]

    def access(self, who: Caller) -> dict[str, Any]:
        """The accounts and QoS levels `who` may submit with (admins: all of them)."""
        if who.is_admin:
            return {
                **self.config.access(who.name, ()),
                "accounts": [a.name for a in self.config.accounts] or None,
                "qos": [q.name for q in self.config.qos],
                "admin": True,
            }
        return {**self.config.access(who.name, group_names(who)), "admin": False}

    def priorities(self) -> list[dict[str, Any]]:
        """Each pending job's priority factors from the last pass, like sprio."""
        if self.last is None:
            return []
        rows = {r["job_id"]: r for r in self.store.jobs(states=[JobState.PENDING.value])}
        out = []
        for job_id, f in sorted(self.last.priorities.items(), key=lambda kv: -kv[1].total):
            row = rows.get(job_id)
            if row is None:
                continue
            out.append(
                {
                    "job_id": job_id,
                    "name": row["name"],
                    "user": row["user"],
                    "account": row["account"],
                    "qos": row["qos"],
                    "partition": row["partition"],
                    "priority": round(f.total, 3),
                    "age": round(f.age, 6),
                    "fairshare": round(f.fairshare, 6),
                    "qos_factor": round(f.qos, 6),
                    "jobsize": round(f.jobsize, 6),
                    "partition_factor": round(f.partition, 6),
                    "nice": f.nice,
                }
            )
        return out

    def tick(self) -> int:
        """One pass: collect ended jobs, schedule, start what was decided. Returns starts."""
        self.executor.reap()
        for row in self.store.jobs(states=[JobState.RUNNING.value]):
            try:
                self._collect(row)
            except StoreError:
                # The state disk is full: spend the reserve on recording what jobs did
                # (a job's outcome must not wait on, or be lost to, a full disk).
                if not self.store.release_reserve():
                    raise
                log.error("state disk full: the reserve is spent on recording job outcomes")
                self._collect(self.store.job(row["job_id"]))
        if self.store.reserve_released and self.clock() >= self._reserve_retry:
            self._reserve_retry = self.clock() + 30.0
            if self.store.keep_reserve():
                log.warning("state disk has room again: the reserve is kept back again")
        if self.agent is not None:
            try:
                self.agent.tick()
            except Exception:
                log.exception("health agent failed")
        decisions = schedule(self.snapshot(), self.clock(), self.policy)
        self.last = decisions
        for pre in decisions.preempts:
            self.store.set_preempt_mode(pre.job_id, pre.mode)  # survives a restart
            self.executor.preempt(pre.job_id)
            log.info("job %s preempted (%s) for job %s", pre.job_id, pre.mode, pre.for_job)
        if decisions.cancels:
            self.store.cancel_pending(decisions.cancels, self.clock(), Reason.DEPENDENCY_NEVER)
        self.store.set_reasons(dict(decisions.reasons))
        if decisions.starts:
            self._start(decisions.starts)
        return len(decisions.starts)

    def _start(self, starts: tuple[Start, ...]) -> None:
        """Record the starts as RUNNING (one commit), then launch each supervisor.

        The commit comes first: a daemon that dies between the two leaves jobs that
        recovery finds never launched, never a job running twice. A job whose planning
        or launch raises is held with the reason (`_hold_broken`); the others start.
        """
        rows = {r["job_id"]: r for r in self.store.jobs_by_ids([s.job_id for s in starts])}
        records = []
        free_cpus = self._free_cpu_ids()
        for start in starts:
            row = rows[start.job_id]
            try:
                spec = self._spec(row)
                stdout = self._output_path(row, spec, spec.output)
                stderr = self._output_path(row, spec, spec.error) if spec.error else stdout
            except Exception as exc:
                self._hold_broken(start.job_id, "cannot plan its start", exc)
                continue
            records.append(
                RunningStart(
                    start.job_id,
                    self.node_name,
                    start.gpu_indices,
                    start.cpus,
                    start.mem_mb,
                    stdout,
                    stderr,
                    tuple(free_cpus[: start.cpus]) if len(free_cpus) >= start.cpus else (),
                )
            )
            free_cpus = free_cpus[start.cpus :]
        marked = set(self.store.mark_running(records, self.clock()))
        cpu_ids = {r.job_id: r.cpu_ids for r in records}
        for start in starts:
            if start.job_id not in marked:
                continue
            row = rows[start.job_id]
            try:
                spec = self._spec(row)
                plan = self._plan(row, spec, start, cpu_ids.get(start.job_id, ()))
                self.executor.launch(plan, spec.script)
            except Exception as exc:
                self._hold_broken(start.job_id, "launch failed", exc)
                continue
            self._mail(row, "BEGIN", "began")

    def _free_cpu_ids(self) -> list[int]:
        """The node's CPU ids no running job holds (empty when CPUs are only counted)."""
        if self.cpu_ids is None:
            return []
        held: set[int] = set()
        for r in self.store.jobs(states=[JobState.RUNNING.value]):
            held.update(json.loads(r["cpu_ids"] or "[]"))
        return [c for c in self.cpu_ids if c not in held]

    def _hold_broken(self, job_id: int, what: str, exc: BaseException) -> None:
        """Hold a job that broke its own start, with the reason; log it once. Other jobs
        are not affected: the pass goes on."""
        detail = printable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        reason = f"{what}: {detail}"[:500]
        log.error("job %s held: %s", job_id, reason)
        self._specs.pop(job_id, None)
        self.store.hold_broken(job_id, reason, self.clock())

    def _output_path(self, row: Row, spec: JobSpec, pattern: str) -> str:
        """An output pattern expanded for this job (%t is left for the supervisor)."""
        expanded = expand(
            pattern,
            job_id=row["job_id"],
            name=row["name"],
            user=row["user"],
            node=self.node_name,
            array_job_id=row["array_job_id"],
            array_task_id=row["array_task_id"],
        )
        return os.path.join(spec.work_dir, expanded)

    def _checkpoint_dir(self, row: Row, spec: JobSpec) -> str:
        """The job's PODIUM_CHECKPOINT_DIR: --checkpoint-dir, else one per job id."""
        return spec.checkpoint_dir or str(self.home / "checkpoints" / str(row["job_id"]))

    def _plan(self, row: Row, spec: JobSpec, start: Start, cpu_ids: tuple[int, ...]) -> LaunchPlan:
        """What the job's supervisor needs: its allocation (`start`, and the CPU ids
        picked for it), identity, files, limits and environment."""
        gpu_ids, cpus = list(start.gpu_indices), start.cpus
        uid, gid, user = row["uid"], row["gid"], row["user"]
        who = self._identity(uid, gid, user, spec.umask)
        checkpoint = self._checkpoint_dir(row, spec)
        if spec.checkpoint_dir is None:
            Path(checkpoint).mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(checkpoint, uid, gid)
        tasks = []
        for i in range(spec.ntasks):
            if spec.gpus_per_task:
                mine = gpu_ids[i * spec.gpus_per_task : (i + 1) * spec.gpus_per_task]
            else:
                mine = gpu_ids
            tasks.append(TaskPlan(procid=i, localid=i, gpu_ids=mine))
        script_path = str(self.executor.job_dir(row["job_id"]) / "script")
        sig = spec.signal
        return LaunchPlan(
            job_id=row["job_id"],
            name=row["name"],
            user=user,
            uid=uid,
            gid=gid,
            groups=list(who.groups),
            umask=who.umask,
            argv=[script_path, *spec.script_args],
            work_dir=spec.work_dir,
            submit_dir=spec.submit_dir,
            environment=spec.environment,
            tasks=tasks,
            stdout=spec.output,
            stderr=spec.error,
            stdin=spec.input,
            open_mode=spec.open_mode,
            node=self.node_name,
            gpu_ids=gpu_ids,
            cpus=cpus,
            cpus_per_task=spec.cpus_per_task,
            time_limit_s=spec.time_limit_s,
            kill_wait_s=self.config.kill_wait_s,
            signal_num=sig.signum if sig else None,
            signal_before_s=sig.seconds_before if sig else 60,
            signal_batch_only=sig.batch_only if sig else False,
            array_job_id=row["array_job_id"],
            array_task_id=row["array_task_id"],
            restart_count=row["restart_count"],
            checkpoint_dir=checkpoint,
            partition=row["partition"],
            qos=row["qos"],
            account=row["account"],
            proctrack=self.config.proctrack,
            heartbeat_timeout_s=spec.heartbeat_timeout_s,
            mem_mb=start.mem_mb,
            cpu_ids=list(cpu_ids),
            deny_devices=[list(d) for d in self._denied_devices(gpu_ids)],
            hide_gpus=self.hide_gpus,
            cgroup_v2_base=self.cgroup_v2_base,
        )

    def _denied_devices(self, gpu_ids: list[int]) -> list[Device]:
        """The devices a job holding `gpu_ids` must not open: every other GPU's, and
        those no job may open (ConstrainDevices)."""
        mine = set(gpu_ids)
        others = [d for i, d in self.gpu_devices.items() if i not in mine and d is not None]
        return sorted(set(others) | set(self.denied_everywhere))


def _health_json(h: Health, recovery: str) -> dict[str, Any]:
    """A node's or GPU's health as `podium nodes` shows it."""
    return {
        "label": h.label.value,
        "fenced": h.fenced,
        "fault": h.fault,
        "reason": h.reason,
        "since": h.since,
        "last_deep_check": h.deep,
        "recovery": recovery,
    }


def spec_gpu_ids(row: Row) -> list[int]:
    """The GPU indices a running job holds."""
    return list(json.loads(row["gpu_ids"])) if row["gpu_ids"] else []


def gpu_owners(running: Iterable[Row]) -> dict[int, int]:
    """GPU index -> the job holding it, over these running jobs' rows."""
    return {g: r["job_id"] for r in running for g in spec_gpu_ids(r)}


__all__ = ["Caller", "Controller"]
