"""The documented job record: what `--json` and the API give for a job, whichever
backend ran it (the embedded daemon, Slurm's squeue/sacct, Slurm's jobcomp log).

`JobRecord` is the one definition of its keys and their types. A backend may add keys
of its own (Slurm adds slurm_state, gpu_ids_by_node, excluded_nodes), never drop or
retype these. Standard library only; tests check every builder against it.
"""

from __future__ import annotations

from typing import TypedDict


class JobRecord(TypedDict):
    """One job, as scripts read it (stable snake_case keys)."""

    job_id: int
    display_id: str  # "12", or "12_3" for task 3 of array 12
    array_job_id: int | None
    array_task_id: int | None
    name: str
    user: str
    uid: int | None
    account: str
    state: str  # a Slurm job state (podium.api.states)
    reason: str | None
    partition: str
    qos: str
    nice: int
    held: bool
    gpus: int
    gpu_ids: list[int]  # on its (first) node
    gpu_type: str | None
    cpus: int
    mem_mb: int | None
    ntasks: int | None  # None where the source does not record it (jobcomp)
    node: str | None  # the node, or Slurm's node list expression
    nodes: list[str]
    node_count: int
    time_limit_s: int | None
    exit_code: int | None
    signal: int | None
    submit_time: str | None  # ISO 8601 with the local offset
    start_time: str | None
    end_time: str | None
    submit_epoch: float | None
    start_epoch: float | None
    end_epoch: float | None
    elapsed_s: float
    gpu_seconds: float
    cpu_seconds: float
    restart_count: int
    dependency: str | None
    stdout: str | None
    stderr: str | None
    work_dir: str
    comment: str | None


JOB_KEYS: tuple[str, ...] = tuple(JobRecord.__annotations__)

__all__ = ["JOB_KEYS", "JobRecord"]
