"""The data the scheduler reads (a Snapshot) and writes (Decisions). Plain and frozen."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from podium.spec.job import Dependency


class Reason:
    """Why a pending job waits, in Slurm's words."""

    PRIORITY = "Priority"
    RESOURCES = "Resources"
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"
    HELD = "Held"
    BEGIN_TIME = "BeginTime"
    ARRAY_LIMIT = "JobArrayTaskLimit"
    NODE_UNAVAILABLE = "ReqNodeNotAvail"
    NONE = "None"


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of a node, by its index as CUDA_VISIBLE_DEVICES names it."""

    index: int
    type: str


@dataclass(frozen=True)
class NodeView:
    """A node as the scheduler sees it. `schedulable` is False when drained or down."""

    name: str
    cpus: int
    memory_mb: int
    gpus: tuple[GpuSlot, ...] = ()
    schedulable: bool = True


@dataclass(frozen=True)
class Allocation:
    """Resources a running job holds on a node."""

    job_id: int
    node: str
    user: str
    gpu_indices: tuple[int, ...] = ()
    cpus: int = 1
    mem_mb: int = 0
    exclusive: str = "none"
    name: str = ""
    array_job_id: int | None = None


@dataclass(frozen=True)
class PendingJob:
    """A job waiting to start, with what it asks for and what it waits on."""

    job_id: int
    user: str
    name: str
    partition: str
    qos_priority: int
    submit_time: float
    cpus: int = 1
    mem_mb: int = 0
    gpus: int = 0
    gpu_type: str | None = None
    exclusive: str = "none"
    nice: int = 0
    held: bool = False
    begin_time: float | None = None
    dependencies: tuple[Dependency, ...] = ()
    dependency_any: bool = False
    kill_on_invalid_dep: bool = False
    array_job_id: int | None = None
    array_throttle: int | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling pass may look at.

    `job_states` maps job ids that pending jobs depend on to their state name;
    `array_members` maps an array's id to the job ids of its tasks. `partition_nodes`
    maps a partition to its node names (absent: every node).
    """

    nodes: tuple[NodeView, ...]
    running: tuple[Allocation, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    job_states: Mapping[int, str] = field(default_factory=dict)
    array_members: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    partition_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Start:
    """Decision: start `job_id` on `node` with exactly these GPUs, CPUs and memory."""

    job_id: int
    node: str
    gpu_indices: tuple[int, ...]
    cpus: int
    mem_mb: int


@dataclass(frozen=True)
class Decisions:
    """The outcome of a pass: jobs to start, why each other pending job waits, and
    jobs to cancel because their dependency can never be satisfied."""

    starts: tuple[Start, ...] = ()
    reasons: Mapping[int, str] = field(default_factory=dict)
    cancels: Mapping[int, str] = field(default_factory=dict)
