"""The documented records: what `--json` and the API give for a job, a node and a
`--test-only` submission, whichever backend made them (the embedded daemon, Slurm's
squeue/sacct/sinfo, Slurm's jobcomp log).

`JobRecord`, `NodeRecord` and `WouldQueueRecord` are the one definition of their keys
and types. A backend may add keys of its own (Slurm adds slurm_state,
gpu_ids_by_node, excluded_nodes, responding), never drop or retype these. Standard
library only; tests check every builder against them.
"""

from __future__ import annotations

from typing import TypedDict


class RunTimes(TypedDict):
    """A job record's time and usage keys (podium.api.times.run_times makes them)."""

    submit_time: str | None  # ISO 8601 with the local offset
    start_time: str | None
    end_time: str | None
    submit_epoch: float | None
    start_epoch: float | None
    end_epoch: float | None
    elapsed_s: float
    gpu_seconds: float
    cpu_seconds: float


class JobRecord(RunTimes):
    """One job, as scripts read it (stable snake_case keys): its times and usage
    (RunTimes) and the rest."""

    job_id: int
    display_id: str  # "12"; "12_3" for task 3 of array 12; "12_[4-9%2]" for its pending tasks
    array_job_id: int | None
    array_task_id: int | None
    array_task_string: str | None  # a pending array's tasks not yet started: "4-9%2"
    name: str
    user: str
    uid: int | None
    account: str
    state: str  # a Slurm job state (podium.api.states)
    ending: str | None  # a COMPLETING job's end (CANCELLED), given before its processes are gone
    reason: str | None
    partition: str
    qos: str
    nice: int
    held: bool
    gpus: int
    gpu_ids: list[int]  # on its (first) node
    gpu_type: str | None  # a MIG profile, "mps" or "shard" for parts of GPUs
    gpu_share: float | None  # parts of GPUs held, in GPUs (mps:50: 0.5); None: whole GPUs
    gpu_mem_peak_mb: int | None  # most GPU memory its processes held (NVML); None: unknown
    cpus: int
    mem_mb: int | None
    ntasks: int | None  # None where the source does not record it (jobcomp)
    node: str | None  # the node, or Slurm's node list expression
    nodes: list[str]
    node_count: int
    time_limit_s: int | None
    exit_code: int | None
    signal: int | None
    restart_count: int
    dependency: str | None
    stdout: str | None
    stderr: str | None
    work_dir: str
    comment: str | None
    wckey: str | None  # sbatch's --wckey, as recorded
    begin_epoch: float | None  # --begin: not started before this
    mem_per: str | None  # memory asked per "node" (--mem), "cpu" or "gpu"; None: the default
    gpus_per_node: int | None  # --gpus-per-node, where asked so (else gpus is the job's)


JOB_KEYS: tuple[str, ...] = tuple(JobRecord.__annotations__)


class StepRecord(TypedDict):
    """One step of a job's latest run, as `podium acct` shows it (sacct's ID.batch,
    ID.0, ...): the batch script, then each srun."""

    job_id: int
    step_id: str  # "batch", "0", "1", ...; "spares": the job's spares (--spares),
    # held idle, with their own gpu_seconds (podium.server.job_rows.spares_step)
    display_id: str  # "12.batch", "12_3.0"
    name: str
    state: str  # a Slurm job state
    exit_code: int | None
    signal: int | None
    start_time: str | None  # ISO 8601 with the local offset
    end_time: str | None
    elapsed_s: float
    ntasks: int
    node: str
    gpu_ids: list[int]


STEP_KEYS: tuple[str, ...] = tuple(StepRecord.__annotations__)


class HealthRecord(TypedDict):
    """A node's or GPU's health as `podium nodes --json` shows it."""

    label: str  # podium.api.health.Label's value
    fenced: bool
    fault: str | None
    reason: str | None
    since: float | None
    last_deep_check: str | None
    recovery: str


class ShareRecord(TypedDict):
    """How a GPU shared by shards or MPS is used: its units and the jobs on them."""

    kind: str  # "shard" or "mps"
    units: int
    used: int
    jobs: list[int]


class GpuRecord(TypedDict):
    """One GPU of a node."""

    index: int
    type: str | None  # a MIG slice's: its profile (1g.10gb)
    memory_mb: int | None
    uuid: str | None  # a MIG slice's: MIG-...
    parent: int | None  # a MIG slice's GPU (None: a whole GPU, or not known)
    mig_start: int | None  # a MIG slice's first memory slice (None: not known)
    share: ShareRecord | None  # a GPU shared by shards or MPS (listed once)
    job_id: int | None  # the running job holding it
    health: HealthRecord  # a MIG slice's: its GPU's


class NodeRecord(TypedDict):
    """One node, as `podium nodes --json` shows it."""

    node: str
    state: str  # idle, mixed, allocated, draining, drained, down, ...
    reason: str | None
    health: HealthRecord
    agent: str | None  # the health agent's state (None: not Podium's agent)
    cpus_total: int
    cpus_alloc: int
    mem_total_mb: int
    mem_alloc_mb: int
    gpus_total: int
    gpus_used: int
    gpu_type: str | None
    features: list[str]
    partitions: list[str]
    gpus: list[GpuRecord]


NODE_KEYS: tuple[str, ...] = tuple(NodeRecord.__annotations__)


class WouldQueueRecord(TypedDict):
    """The reply to `podium submit --test-only`: what the job would ask for, nothing
    queued."""

    job_id: None
    state: str  # "WOULD_QUEUE"
    name: str
    gpus: int
    cpus: int
    mem_mb: int
    partition: str
    qos: str
    time_limit_s: int | None
    array_tasks: int | None


def would_queue(
    *,
    name: str,
    gpus: int,
    cpus: int,
    mem_mb: int,
    partition: str,
    qos: str,
    time_limit_s: int | None,
    array_tasks: int | None,
) -> WouldQueueRecord:
    """The --test-only reply, built the same way by every backend."""
    return {
        "job_id": None,
        "state": "WOULD_QUEUE",
        "name": name,
        "gpus": gpus,
        "cpus": cpus,
        "mem_mb": mem_mb,
        "partition": partition,
        "qos": qos,
        "time_limit_s": time_limit_s,
        "array_tasks": array_tasks,
    }


__all__ = [
    "JOB_KEYS",
    "NODE_KEYS",
    "GpuRecord",
    "HealthRecord",
    "JobRecord",
    "NodeRecord",
    "RunTimes",
    "WouldQueueRecord",
    "would_queue",
]
