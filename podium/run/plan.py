"""LaunchPlan and Grant: the typed view of what the daemon hands a job's supervisor.

The daemon writes a LaunchPlan (`to_json`); the supervisor reads it back
(`LaunchPlan.from_json`). Named tuples, not dataclasses: the supervisor imports this
at every start, and `dataclasses` would load `inspect` (20 ms) on its cold path.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class Grant(NamedTuple):
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


class TaskPlan(NamedTuple):
    """One task of a job: its rank on the node and the GPUs it sees."""

    procid: int
    localid: int
    gpu_ids: list[int]


class LaunchPlan(NamedTuple):
    """Everything a supervisor needs to run a job, resolved by the daemon. Immutable:
    the daemon makes it once; the supervisor reads it back from JSON (`from_json`).
    The list and dict defaults are shared, never changed."""

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
    cpu_ids: list[int] = []  # enforced by cpuset where it exists
    deny_devices: list[list[Any]] = []  # ["c", major, minor]
    hide_gpus: bool = False  # CUDA_VISIBLE_DEVICES names no device (declared GPUs only)
    cgroup_v2_base: str | None = None  # the v2 group jobs go under (None: the supervisor's)
    container: dict[str, Any] | None = None  # podium.run.containers.lifecycle.prepare's request
    cuda_names: list[str] = []  # per gpu_ids: Grant.cuda_names
    replicas: int | None = None  # an elastic job's: its tasks are its replicas
    resize_count: int = 0  # how often this elastic job was resized so far
    resize_signal: int = 10  # what each replica gets before a resize (SIGUSR1)
    spares: list[list[int]] = []  # per spare (--spares), the GPUs it holds idle
    torchelastic: bool = False  # spares, and a script that runs torchrun (podium.run.torchelastic)
    torchft: bool = False  # --torchft: each task a torchft replica group (podium.run.torchft)
    extra: dict[str, Any] = {}

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data."""
        data = self._asdict()
        data["tasks"] = [task._asdict() for task in self.tasks]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LaunchPlan:
        """The plan `to_json` wrote (TypeError for a key that is not a field)."""
        tasks = [TaskPlan(**task) for task in data["tasks"]]
        return cls(**{**data, "tasks": tasks})
