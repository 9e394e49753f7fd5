"""The embedded cluster as the API sees it: one object whose methods each take the
reactor's lock and hand the request to the part that does that job.

Parts (each its own module): intake (submissions), views (reads), control (cancel,
hold, drain, resume, faults), launch (planning), reactor (passes, ends, recovery)
with its effects. The health agent is built on its own, from the reactor, and
attached with `attach_agent`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from podium.api.caller import Caller, user_name
from podium.errors import SpecError
from podium.node.gpu_memory import by_job, process_memory
from podium.node.health.base import Result
from podium.node.inventory import from_nvml
from podium.recover.agent import HealthAgent
from podium.run.executor import LocalExecutor
from podium.server.control import Control
from podium.server.effects import LocalEffects
from podium.server.intake import Intake, Submitted
from podium.server.launch import Planner
from podium.server.local_node import LocalNode
from podium.server.mig_advisor import advice_record
from podium.server.mig_apply import MigApplier
from podium.server.reactor import Reactor
from podium.server.records import spec_gpu_ids
from podium.server.views import Views
from podium.spec.build import SubmitRequest
from podium.spec.cluster import ClusterConfig
from podium.spec.request import BatchRequest
from podium.store.db import Store
from podium.store.health import HealthTable
from podium.store.mig_layouts import MigLayouts


class Controller:
    """Owns the store, the reactor and the API-facing parts of one embedded cluster."""

    def __init__(
        self,
        home: Path,
        config: ClusterConfig,
        store: Store,
        executor: LocalExecutor,
        node: LocalNode,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.home = home
        self.config = config
        self.store = store
        self.node = node
        self.clock = clock
        self.owner_uid = os.geteuid()
        self.executor = executor
        self.real_gpus = from_nvml(node.gpus)
        self._next_memory_sample = 0.0
        self.health = HealthTable(store)
        self.planner = Planner(home, config, node)
        effects = LocalEffects(
            executor,
            self.planner,
            lambda job_id, detail: store.event(self.clock(), "mail", job_id=job_id, detail=detail),
        )
        self.reactor = Reactor(store, config, node, self.health, self.planner, effects, clock)
        self.lock = self.reactor.lock
        self.agent: HealthAgent | None = None
        self.intake = Intake(home, config, store, self.planner)
        self.views = Views(self.reactor, lambda: self.agent)
        self.control = Control(self.reactor, executor, lambda: self.agent)
        self.migs = MigApplier(
            config, node, MigLayouts(store), self.health, self.real_gpus, clock=clock
        )
        store.ensure_node(node.name)

    def attach_agent(self, agent: HealthAgent) -> None:
        """Serve `agent`'s checks through the API and tell it about failed runs."""
        self.agent = agent
        self.reactor.job_failed_hooks.append(agent.job_failed)

    def caller(self, uid: int, gid: int) -> Caller:
        return Caller(uid, gid, user_name(uid), uid in (0, self.owner_uid))

    # --- the loop (on a worker thread) -----------------------------------------------

    def recover(self) -> dict[str, int]:
        return self.reactor.recover()

    def cycle(self) -> float:
        """Collect ended runs, let the health agent look, and run a pass when one is
        due. Returns how long until a pass is due (the loop also wakes on changes)."""
        self.reactor.collect()
        if self.planner.mps.live:
            self.stop_idle_mps()
        if self.real_gpus and self.clock() >= self._next_memory_sample:
            self._next_memory_sample = self.clock() + self.config.health.interval_s
            self.sample_gpu_memory()
        if self.agent is not None:
            with self.lock:
                self.agent.tick()
        if self.reactor.pass_due() == 0.0:
            self.reactor.run_pass()
        return self.reactor.pass_due()

    def sample_gpu_memory(self) -> None:
        """Raise each running job's GPU memory high-water mark to what its processes
        hold now, as NVML reports them (podium.node.gpu_memory)."""
        used = process_memory()
        if not used:
            return
        with self.lock:
            running = [r["job_id"] for r in self.reactor.running_rows()]
        sessions = {s: j for j in running if (s := self.executor.session(j)) is not None}
        self.store.raise_gpu_memory(by_job(used, sessions))

    def stop_idle_mps(self) -> None:
        """Stop the MPS control daemons whose GPU has no running MPS job of their user
        left (podium.node.mps)."""
        units = {d.index: d.physical for d in self.node.devices if d.kind == "mps"}
        with self.lock:
            rows = self.reactor.running_rows()
        in_use = {(units[g], r["uid"]) for r in rows for g in spec_gpu_ids(r) if g in units}
        self.planner.mps.stop_idle(in_use)

    def mig_advice(self) -> dict[str, Any]:
        """The MIG advisor's answer for the pending queue (podium.server.mig_advisor)."""
        with self.lock:
            running = self.reactor.running_rows()
            self.reactor.queue.refresh()
            pending = list(self.reactor.queue.jobs.values())
            last = self.reactor.last
            priority = {j: f.total for j, f in last.priorities.items()} if last else {}
        return advice_record(
            self.node, self.config.node.gpus.type, running, pending, priority, self.clock()
        )

    def mig_apply(self, who: Caller, gpu: int, layout: list[str]) -> dict[str, Any]:
        """Plan GPU `gpu`'s new MIG layout and drain it; the health agent applies it
        once no job holds the GPU (podium.server.mig_apply)."""
        with self.lock:
            answer = self.migs.request(
                who.name, who.is_admin, gpu, layout, self.reactor.running_rows(), self.clock()
            )
        self.reactor.wake()
        return answer

    def handle_health(self, results: list[Result]) -> None:
        """Act on health check results run on request (`podium health`)."""
        if self.agent is not None:
            with self.lock:
                self.agent.handle(results, self.clock())

    # --- requests ---------------------------------------------------------------------

    def submit(self, req: SubmitRequest, who: Caller) -> Submitted:
        with self.lock:
            return self.intake.submit(req, who, self.clock())

    def submit_batch(self, batch: BatchRequest, who: Caller) -> list[list[int]]:
        """Submit every job of `batch` in one commit, or none (see Intake.submit_batch)."""
        with self.lock:
            return self.intake.submit_batch(
                list(batch.jobs), who, self.clock(), batch.idempotency_key
            )

    def dry_run(self, req: SubmitRequest, who: Caller) -> dict[str, Any]:
        """What submitting `req` would do, nothing stored: the job and the launch plan
        its supervisor would get on an idle node."""
        with self.lock:
            now = self.clock()
            spec = self.intake.check(req, who, now).spec
        if spec.array is not None:
            raise SpecError("--dry-run shows one job's plan: submit without --array to see it")
        row = {
            "job_id": 0,
            "name": spec.name,
            "uid": who.uid,
            "gid": who.gid,
            "user": who.name,
            "array_job_id": None,
            "array_task_id": None,
            "restart_count": 0,
            "partition": spec.partition,
            "qos": spec.qos,
            "account": spec.account,
        }
        gpu_ids = self.node.devices_for(spec.gpu_type)[: spec.gpus]
        cpu_ids = tuple((self.node.cpu_ids or ())[: spec.cpus])
        plan = self.planner.plan(
            row,
            spec,
            gpu_ids,
            spec.cpus,
            spec.mem_mb,
            cpu_ids,
            "SCRIPT",
            make_dirs=False,
        )
        data = plan.to_json()
        data["environment"] = sorted(plan.environment)  # names only: values may be secret
        job = spec.model_dump(mode="json", exclude={"environment"})
        return {"backend": "embedded", "job": job, "launch_plan": data}

    def list_jobs(self, **filters: Any) -> list[dict[str, Any]]:
        with self.lock:
            return self.views.jobs(**filters)

    def acct(self, **filters: Any) -> list[dict[str, Any]]:
        with self.lock:
            return self.views.acct(**filters)

    def jobs_json(self, **filters: Any) -> str:
        with self.lock:
            return self.views.jobs_json(**filters)

    def show(self, job_id: int, who: Caller, task: int | None = None) -> dict[str, Any]:
        with self.lock:
            return self.views.show(job_id, who, task)

    def nodes(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.views.nodes()

    def share(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.views.share()

    def access(self, who: Caller) -> dict[str, Any]:
        return self.views.access(who)

    def priorities(self) -> list[dict[str, Any]]:
        with self.lock:
            return self.views.priorities()

    def cancel(
        self,
        who: Caller,
        job_ids: list[int],
        user: str | None = None,
        name: str | None = None,
        states: list[str] | None = None,
        tasks: Sequence[tuple[int, int]] = (),
    ) -> list[int]:
        with self.lock:
            return self.control.cancel(who, job_ids, user, name, states, tasks)

    def send_signal(
        self,
        who: Caller,
        job_ids: list[int],
        tasks: Sequence[tuple[int, int]],
        sig: int,
        scope: str,
    ) -> list[int]:
        with self.lock:
            return self.control.send_signal(who, job_ids, tasks, sig, scope)

    def set_time_limit(self, who: Caller, job_id: int, seconds: int | None) -> list[int]:
        with self.lock:
            return self.control.set_time_limit(who, job_id, seconds)

    def requeue(
        self, who: Caller, job_ids: list[int], tasks: Sequence[tuple[int, int]] = ()
    ) -> list[int]:
        with self.lock:
            return self.control.requeue(who, job_ids, tasks)

    def hold(
        self, who: Caller, job_ids: list[int], held: bool, tasks: Sequence[tuple[int, int]] = ()
    ) -> list[int]:
        with self.lock:
            return self.control.hold(who, job_ids, held, tasks)

    def drain(self, who: Caller, node: str, reason: str) -> dict[str, Any]:
        with self.lock:
            self.control.drain(who, node, reason)
            return self.views.nodes()[0]

    def resume(self, who: Caller, node: str, gpu: int | None = None) -> dict[str, Any]:
        with self.lock:
            self.control.resume(who, node, gpu)
            for g in [gpu] if gpu is not None else [g.index for g in self.node.gpus]:
                self.migs.plans.drop_plan(node, g)  # resumed as it is: the plan is moot
            return self.views.nodes()[0]

    def inject(self, who: Caller, kind: str, job_id: int, rank: int) -> int:
        with self.lock:
            return self.control.inject(who, kind, job_id, rank)

    def inject_xid(self, who: Caller, gpu: int, code: int) -> str:
        with self.lock:
            return self.control.inject_xid(who, gpu, code)

    def states(self, job_ids: Iterable[int]) -> dict[int, str]:
        with self.lock:
            return self.store.states_of(job_ids)


__all__ = ["Caller", "Controller"]
