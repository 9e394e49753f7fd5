"""A real store, reactor and the server's parts over recorded effects: what the
server's unit tests drive (no daemon, no processes)."""

from __future__ import annotations

from pathlib import Path

from podium.api.caller import Caller
from podium.config.cluster import GpuInventory, default_config
from podium.jobspec.build import SubmitRequest
from podium.jobspec.job import JobSpec
from podium.node.inventory import declared
from podium.run.executor import Poll
from podium.run.job_result import JobResult
from podium.run.plan import Grant
from podium.server.control import Control
from podium.server.intake import Intake
from podium.server.launch import Planner
from podium.server.local_node import LocalNode
from podium.server.reactor import Reactor
from podium.server.starting import StartingJob
from podium.server.views import Views
from podium.store.db import Row, Store
from podium.store.health_table import HealthTable

ME = Caller(1000, 1000, "alice")
BOB = Caller(1001, 1001, "bob")
ADMIN = Caller(0, 0, "root", True)


class Recorded:
    """Effects that record what the reactor asked for; runs end when told."""

    def __init__(self) -> None:
        self.launched: list[tuple[int, list[int]]] = []
        self.signals: list[tuple[str, int]] = []
        self.ended: dict[int, JobResult] = {}
        self.lost: set[int] = set()
        self.notes: list[tuple[int, str]] = []
        self.forgotten: list[tuple[int, str]] = []  # (job, its state when let go)
        self.store: Store | None = None
        self.runs = self  # both halves of the effects, recorded here

    def launch(self, job: StartingJob, spec: JobSpec, grant: Grant) -> None:
        self.launched.append((job.job_id, list(grant.units)))

    def cancel(self, job_id: int) -> bool:
        self.signals.append(("cancel", job_id))
        return True

    def preempt(self, job_id: int) -> bool:
        self.signals.append(("preempt", job_id))
        return True

    def requeue(self, job_id: int) -> bool:
        self.signals.append(("requeue", job_id))
        return True

    def resize(self, job_id: int, replicas: int, grace_s: float) -> bool:
        self.signals.append(("resize", job_id))
        return True

    def saved(self, job_id: int, step: int) -> bool:
        self.signals.append(("saved", job_id))
        return True

    def fail(self, job_id: int, reason: str, gpu: int | None) -> bool:
        self.signals.append(("fail", job_id))
        return True

    def send_signal(self, job_id: int, sig: int, scope: str) -> bool:
        self.signals.append((f"signal {sig} {scope}", job_id))
        return True

    def poll(self, job_id: int) -> Poll:
        if job_id in self.lost:
            return Poll("lost")
        result = self.ended.get(job_id)
        return Poll("ended", result) if result else Poll("running")

    def kill_leftovers(self, job_id: int, scan_session: bool) -> int:
        return 0

    def forget(self, job_id: int) -> None:
        assert self.store is not None
        self.forgotten.append((job_id, str(self.store.job(job_id)["state"])))

    def fault_note(self, job_id: int) -> tuple[str, int | None] | None:
        return None

    def reap(self) -> int:
        return 0

    def notify(self, row: Row, spec: JobSpec, kind: str, what: str) -> None:
        self.notes.append((row["job_id"], kind))


class RecordedExecutor:
    """The executor's calls Control makes directly, recorded."""

    def __init__(self) -> None:
        self.time_limits: list[tuple[int, int | None]] = []

    def set_time_limit(self, job_id: int, seconds: int | None) -> bool:
        self.time_limits.append((job_id, seconds))
        return True

    def task_pids(self, job_id: int) -> dict[int, int]:
        return {}


class Cluster:
    """One embedded node (2 declared GPUs, 8 CPUs), its store, reactor, intake, views and
    control, over recorded effects; the clock stands at 100 s."""

    def __init__(self, tmp: Path, gpus: int = 2) -> None:
        config = default_config(gpus=gpus, cpus=8)
        config.node.gpus = GpuInventory(source="declared", count=gpus, type="h100")
        self.store = Store(tmp / "db")
        self.store.keep_reserve(4096)
        self.node = LocalNode.from_config(config, declared(config.node.gpus))
        self.node.cpu_ids = None
        self.planner = Planner(tmp, config, self.node)
        self.effects = Recorded()
        self.effects.store = self.store
        self.store.ensure_node(self.node.name)
        self.reactor = Reactor(
            self.store, config, self.node, HealthTable(self.store), self.planner, self.effects
        )
        self.reactor.clock = lambda: 100.0
        self.intake = Intake(tmp, config, self.store, self.planner)
        self.planner.owner_uid = 0  # as root: jobs run as their users
        self.work = tmp
        self.executor = RecordedExecutor()
        self.views = Views(self.reactor, lambda: None)
        self.control = Control(self.reactor, self.executor, lambda: None)  # type: ignore[arg-type]

    def submit(self, *options: str, who: Caller = ME) -> int:
        req = SubmitRequest(wrap="true", options=list(options), cwd=str(self.work))
        who = who._replace(cwd=str(self.work))  # submitted from there, as by the CLI
        return int(self.intake.submit(req, who, 100.0).jobs[0]["job_id"])

    def state(self, job_id: int) -> str:
        return str(self.store.job(job_id)["state"])

    def end(self, job_id: int, state: str = "COMPLETED", code: int = 0) -> None:
        self.effects.ended[job_id] = JobResult(state, code, None, 100.0, 160.0)
