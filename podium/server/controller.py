"""The embedded cluster as the API sees it: the parts that serve requests, built once,
and one way to call any of them under the reactor's lock (`locked`).

Parts (each its own module): intake (submissions), views (reads), control (cancel,
hold, signal, time limits, drain, resume, faults), the MIG applier, and the loop's
housekeeping; launch planning and the reactor (passes, ends, recovery) with its
effects below them. The health agent is built on its own, from the reactor, and
attached with `attach_agent`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

from podium.api.caller import Caller, user_name
from podium.config.cluster import ClusterConfig
from podium.node.gpu_telemetry import no_telemetry
from podium.node.inventory import from_nvml
from podium.recover.agent import HealthAgent
from podium.run.executor import LocalExecutor
from podium.server.control import Control
from podium.server.effects import LocalEffects
from podium.server.forecast_view import ForecastBook
from podium.server.housekeeping import Housekeeping
from podium.server.intake import Intake
from podium.server.launch import Planner
from podium.server.local_node import LocalNode
from podium.server.mig_apply import MigApplier
from podium.server.reactor import Reactor
from podium.server.views import Views
from podium.store.db import Store
from podium.store.health_table import HealthTable
from podium.store.mig_layouts import MigLayouts

P = ParamSpec("P")
T = TypeVar("T")


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
        self.config = config
        self.store = store
        self.node = node
        self.clock = clock
        self.owner_uid = os.geteuid()
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
        self.config_file: str | None = None  # where the config came from (podium up reads it)
        # the GPUs' NVML values by index (node.gpu_telemetry; nothing on declared GPUs)
        self.telemetry: Callable[[list[int]], dict[int, dict[str, float]]] = no_telemetry
        real_gpus = from_nvml(node.gpus)
        self.intake = Intake(home, config, store, self.planner)
        self.views = Views(self.reactor, lambda: self.agent)
        self.forecasts = ForecastBook(self.reactor)  # shared by every request, made unlocked
        self.migs = MigApplier(config, node, MigLayouts(store), self.health, real_gpus, clock=clock)
        self.control = Control(self.reactor, executor, lambda: self.agent, self.migs.plans)
        self.housekeeping = Housekeeping(self.reactor, executor, lambda: self.agent, real_gpus)
        store.ensure_node(node.name)

    def attach_agent(self, agent: HealthAgent) -> None:
        """Serve `agent`'s checks through the API and tell it about failed runs."""
        self.agent = agent
        self.reactor.job_failed_hooks.append(agent.job_failed)

    def caller(self, uid: int, gid: int) -> Caller:
        """The caller with this uid and gid: an administrator when root or the
        daemon's owner."""
        return Caller(uid, gid, user_name(uid), uid in (0, self.owner_uid))

    def locked(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`call(*args, **kwargs)` under the reactor's lock: how every request reads or
        changes the cluster (a part's methods expect the lock held). What it committed
        as durable is on disk when this returns: flushed after the lock is released,
        once for every request that committed meanwhile (a group commit)."""
        with self.store.group_commit(), self.lock:
            return call(*args, **kwargs)


__all__ = ["Caller", "Controller"]
