"""JobSpec: a job request resolved to what it asks of one node. Plain typed data.

A JobSpec carries no backend logic. It is produced by `podium.jobspec.build` from a
batch script, a YAML file and command-line options, and stored as JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from podium.api import arrays
from podium.api.elastic_sizes import elastic_sizes
from podium.api.states import JobState

DependencyKind = Literal["after", "afterok", "afternotok", "afterany", "singleton"]


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Dependency(Frozen):
    """One dependency clause: `kind` on each of `job_ids` (empty for singleton)."""

    kind: DependencyKind
    job_ids: tuple[int, ...] = ()


class SignalSpec(Frozen):
    """--signal: send `signum` `seconds_before` the time limit (to task 0 only if batch_only)."""

    signum: int
    seconds_before: int = 60
    batch_only: bool = False


class ArraySpec(Frozen):
    """--array: the task indices, as ranges in Slurm's notation ("0-15:4,20",
    podium.api.arrays: its size never matters), and the most that may run at once.
    Specs stored before 2026-11-24 listed every index (`indices`): read as ranges."""

    ranges: str
    throttle: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _listed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "indices" in data and "ranges" not in data:
            data = dict(data)
            data["ranges"] = arrays.format_ranges(arrays.compress(data.pop("indices")))
        return data

    @classmethod
    def of(cls, indices: Iterable[int], throttle: int | None = None) -> ArraySpec:
        """The spec of these indices."""
        return cls(ranges=arrays.format_ranges(arrays.compress(indices)), throttle=throttle)

    @property
    def count(self) -> int:
        """How many tasks."""
        return arrays.count(arrays.parse(self.ranges))


class ElasticSpec(Frozen):
    """--elastic=MIN:MAX[:STEP]: the job runs as MIN to MAX replicas (data-parallel
    ranks, each one task with `replica_gpus`, `replica_cpus` and `replica_mem_mb`),
    resized in steps of STEP. Before a resize every rank gets `signal` and has
    `grace_s` seconds to save and exit (or acknowledge) before it is stopped. With
    --spares=N it also holds N replicas' worth, idle, to take a failed replica's place
    (docs/resiliency.md: replace, don't restart)."""

    min: int = Field(ge=1)
    max: int = Field(ge=1)
    step: int = Field(default=1, ge=1)
    replica_gpus: int = Field(default=0, ge=0)
    replica_cpus: int = Field(default=1, ge=1)
    replica_mem_mb: int = Field(default=0, ge=0)
    signal: int = 10  # SIGUSR1
    grace_s: int = Field(default=60, ge=0)
    spares: int = Field(default=0, ge=0)  # --spares: replicas' worth held to replace a failed one

    def held(self, replicas: int) -> tuple[int, int, int]:
        """GPUs, CPUs and memory (MB) a start of `replicas` replicas holds, its spares
        included."""
        n = replicas + self.spares
        return n * self.replica_gpus, n * self.replica_cpus, n * self.replica_mem_mb

    def sizes(self) -> list[int]:
        """Every size it may run at, largest first (`elastic_sizes`)."""
        return elastic_sizes(self.min, self.max, self.step)

    def replicas_of(self, cpus: int) -> int:
        """How many replicas a start holding `cpus` CPUs runs (whole replicas, its
        spares not counted)."""
        return max(0, cpus // self.replica_cpus - self.spares)


ExclusiveMode = Literal["none", "node", "user"]


DEFAULT_OUTPUT = "slurm-%j.out"  # sbatch's: scripts and tools look for slurm-<id>.out
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"  # an array task's, as sbatch names it


class JobSpec(Frozen):
    """A job request resolved against the cluster: everything the scheduler and the
    executor need, nothing about how a backend runs it."""

    name: str
    script: str
    script_args: tuple[str, ...] = ()
    work_dir: str
    submit_dir: str
    environment: dict[str, str] = Field(default_factory=dict)
    umask: int = 0o022  # the submitter's, for the job's files and processes
    nodes: int = 1
    ntasks: int = 1
    ntasks_per_node: int | None = None
    cpus_per_task: int = 1
    cpus: int = 1
    gpus: int = 0
    gpus_per_task: int | None = None
    gpus_per_node: int | None = None  # set when the job asked per node (multi-node jobs)
    gpu_type: str | None = None
    mem_mb: int  # per node
    mem_request: tuple[str, int] | None = None  # the option as given: ("mem-per-gpu", MiB)
    time_limit_s: int | None = None
    time_min_s: int | None = None
    output: str = DEFAULT_OUTPUT
    error: str | None = None
    input: str | None = None
    open_mode: Literal["truncate", "append"] = "truncate"
    partition: str
    qos: str
    account: str
    requeue: bool = True
    dependencies: tuple[Dependency, ...] = ()
    dependency_any: bool = False
    kill_on_invalid_dep: bool = False
    array: ArraySpec | None = None
    signal: SignalSpec | None = None
    exclusive: ExclusiveMode = "none"
    hold: bool = False
    nice: int = 0
    begin_time: float | None = None
    comment: str | None = None
    wckey: str | None = None
    # CPU and GPU binding options as given (--ntasks-per-core, --cpu-bind, --hint,
    # --gres-flags): Slurm applies them; the embedded cluster records them and gives
    # CPUs by count (docs/slurm-compat.md).
    binding: tuple[tuple[str, str], ...] = ()
    # sbatch options only the backend's engine interprets (`podium.jobspec.options.
    # SLURM_ONLY`), as given, that its admission did not refuse: the Slurm backend
    # writes them into #SBATCH lines; the embedded cluster refuses every one.
    engine_options: tuple[tuple[str, str | None], ...] = ()
    mail_types: tuple[str, ...] = ()
    mail_user: str | None = None
    constraint: str | None = None
    nodelist: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    container_image: str | None = None
    container_mounts: tuple[str, ...] = ()
    container_workdir: str | None = None
    container_name: str | None = None
    container_save: str | None = None
    container_env: tuple[str, ...] = ()  # these take the job's values over the image's
    container_writable: bool | None = None  # None: the runtime's default
    container_mount_home: bool | None = None
    container_remap_root: bool | None = None
    container_entrypoint: bool | None = None
    checkpoint_dir: str | None = None
    auto_resume: int = 0  # restarts after a fault (node, GPU, hang, requeue exit code)
    requeue_exit_codes: tuple[int, ...] = ()
    no_requeue_exit_codes: tuple[int, ...] = ()
    heartbeat_timeout_s: int | None = None
    elastic: ElasticSpec | None = None  # resources above are for its MIN replicas
    spare_nodes: int = Field(default=0, ge=0)  # --spares on Slurm: whole nodes held idle
    torchft: bool = False  # --torchft: each replica a torchft replica group (podium.run.torchft)


__all__ = ["ArraySpec", "Dependency", "ElasticSpec", "JobSpec", "JobState", "SignalSpec"]
