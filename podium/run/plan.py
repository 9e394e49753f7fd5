"""LaunchPlan and JobResult: the typed view of the daemon <-> supervisor files.

The daemon writes a LaunchPlan (`to_json`) and reads a JobResult; the supervisor reads
the same JSON without these classes, to start fast (see `podium.run.files`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Grant:
    """What one start of a job holds on its node: made once from the scheduler's
    decision (`podium.server.local_node.LocalNode.grant_of`) and carried unchanged
    into the launch plan, the job's SLURM_* variables and its tasks' environment."""

    units: tuple[int, ...]  # the node's devices held as picked: GPUs, MIG slices, shards, MPS
    gpu_ids: tuple[int, ...]  # the GPUs the job sees: a shard or MPS unit as its GPU, once
    cuda_names: tuple[str, ...]  # per gpu_ids: its CUDA_VISIBLE_DEVICES name (index or UUID)
    cpus: int
    mem_mb: int
    cpu_ids: tuple[int, ...] = ()  # the CPU ids given (empty where CPUs are only counted)

    def cuda_names_by_index(self) -> str:
        """ "index=UUID,..." for the GPUs CUDA must see by UUID (a MIG slice, an MPS
        server's GPU); "" for none. What srun in the job reads (PODIUM_CUDA_NAMES)."""
        pairs = zip(self.gpu_ids, self.cuda_names, strict=True)
        return ",".join(f"{i}={name}" for i, name in pairs if name != str(i))


@dataclass
class TaskPlan:
    """One task of a job: its rank on the node and the GPUs it sees."""

    procid: int
    localid: int
    gpu_ids: list[int]


@dataclass
class LaunchPlan:
    """Everything a supervisor needs to run a job, resolved by the daemon."""

    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    groups: list[int]
    argv: list[str]
    work_dir: str
    submit_dir: str
    environment: dict[str, str]
    tasks: list[TaskPlan]
    stdout: str
    stderr: str | None
    stdin: str | None
    open_mode: str
    node: str
    gpu_ids: list[int]
    cpus: int
    cpus_per_task: int
    time_limit_s: int | None
    kill_wait_s: float
    signal_num: int | None = None
    signal_before_s: int = 60
    signal_batch_only: bool = False
    array_job_id: int | None = None
    array_task_id: int | None = None
    restart_count: int = 0
    checkpoint_dir: str | None = None
    partition: str = ""
    qos: str = ""
    account: str = ""
    proctrack: str = "auto"
    heartbeat_timeout_s: int | None = None
    umask: int = 0o022
    mem_mb: int | None = None  # enforced by the memory controller where it exists
    cpu_ids: list[int] = field(default_factory=list)  # enforced by cpuset where it exists
    deny_devices: list[list[Any]] = field(default_factory=list)  # ["c", major, minor]
    hide_gpus: bool = False  # CUDA_VISIBLE_DEVICES names no device (declared GPUs only)
    cgroup_v2_base: str | None = None  # the v2 group jobs go under (None: the supervisor's)
    container: dict[str, Any] | None = None  # podium.run.containers.lifecycle.prepare's request
    cuda_names: list[str] = field(default_factory=list)  # per gpu_ids: Grant.cuda_names
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data: what `asdict` gives, without its deep copy
        (the daemon writes one per job launched)."""
        data = dict(vars(self))
        data["tasks"] = [dict(vars(task)) for task in self.tasks]
        return data


@dataclass
class TaskResult:
    procid: int
    exit_code: int | None
    signal: int | None


@dataclass
class JobResult:
    """What a supervisor records when its job is over."""

    state: str
    exit_code: int | None
    signal: int | None
    start_time: float
    end_time: float
    reason: str = "None"
    tasks: list[TaskResult] = field(default_factory=list)
    leftover_killed: int = 0
    fault: str | None = None  # "hang" or "node": Podium stopped the job for a fault
    steps: list[dict[str, Any]] = field(default_factory=list)  # podium.run.steps records

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobResult:
        data = dict(data)
        data["tasks"] = [TaskResult(**t) for t in data.get("tasks", [])]
        return cls(**data)
