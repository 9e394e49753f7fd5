"""What each task of a job starts with: its environment (SLURM_* and PODIUM_*
variables, CUDA_VISIBLE_DEVICES, the rendezvous port), identity and file opener.
Stdlib only: the supervisor imports it at every job start."""

from __future__ import annotations

from typing import TYPE_CHECKING

from podium.run.identity import Identity

if TYPE_CHECKING:  # the supervisor reads the plan as plain JSON, to start fast
    from collections.abc import Iterable, Mapping

    from podium.run.plan import LaunchPlan, TaskPlan

CUDA_NAMES = "PODIUM_CUDA_NAMES"  # "index=UUID,...": GPUs CUDA must see by UUID (MIG, MPS)
SLICE_PER_TASK = "PODIUM_SLICE_PER_TASK"  # "1": the job's MIG slices, one per srun task


def cuda_visible(gpu_ids: Iterable[int], env: Mapping[str, str]) -> str:
    """CUDA_VISIBLE_DEVICES for these GPU indices inside a running job (srun's steps,
    which see only the job's environment): each GPU's index, or the UUID that
    $PODIUM_CUDA_NAMES maps it to (the job's Grant, written by its plan)."""
    names = dict(item.split("=", 1) for item in env.get(CUDA_NAMES, "").split(",") if "=" in item)
    return ",".join(names.get(str(g), str(g)) for g in gpu_ids)


def _task_cuda_visible(plan: LaunchPlan, task: TaskPlan) -> str:
    """CUDA_VISIBLE_DEVICES for one task: each of its GPUs by its name in the plan's
    grant (`LaunchPlan.cuda_names`: the index, or a MIG slice's or MPS GPU's UUID)."""
    names = dict(zip(plan.gpu_ids, plan.cuda_names, strict=False))
    return ",".join(names.get(g, str(g)) for g in task.gpu_ids)


def task_environment(
    plan: LaunchPlan,
    task: TaskPlan,
    master_port: int,
    heartbeat: str | None = None,
    started: float | None = None,
) -> dict[str, str]:
    """The environment of one task: the job's (its exported environment and the
    SLURM_* variables the daemon planned) plus this task's and Podium's. `started` is
    when the job started (SLURM_JOB_START_TIME, and the end by its time limit)."""
    env = dict(plan.environment)
    ntasks = len(plan.tasks)
    env.update(
        PODIUM_JOB_ID=str(plan.job_id),
        PODIUM_JOB_NAME=plan.name,
        PODIUM_JOB_USER=plan.user,
        PODIUM_JOB_PARTITION=plan.partition,
        PODIUM_JOB_QOS=plan.qos,
        PODIUM_JOB_ACCOUNT=plan.account,
        PODIUM_NTASKS=plan.environment.get("SLURM_NTASKS", str(ntasks)),  # the job's
        PODIUM_PROCID=str(task.procid),
        PODIUM_LOCALID=str(task.localid),
        PODIUM_NODEID="0",
        PODIUM_NNODES="1",
        PODIUM_NODELIST=plan.node,
        PODIUM_SUBMIT_DIR=plan.submit_dir,
        PODIUM_CPUS_PER_TASK=str(plan.cpus_per_task),
        PODIUM_JOB_CPUS=str(plan.cpus),
        PODIUM_JOB_GPUS=",".join(str(g) for g in plan.gpu_ids),
        PODIUM_RESTART_COUNT=str(plan.restart_count),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(master_port),
        WORLD_SIZE=str(ntasks),
        RANK=str(task.procid),
        LOCAL_RANK=str(task.localid),
        LOCAL_WORLD_SIZE=str(ntasks),
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
        CUDA_VISIBLE_DEVICES=("" if plan.hide_gpus else _task_cuda_visible(plan, task)),
    )
    env.update(  # this task's place, as srun(1) names it; the job's are in the plan
        SLURM_PROCID=str(task.procid),
        SLURM_LOCALID=str(task.localid),
        SLURM_NODEID="0",
        SLURM_GTIDS=",".join(str(t.procid) for t in plan.tasks),
    )
    if started is not None:
        env["SLURM_JOB_START_TIME"] = str(int(started))
        if plan.time_limit_s is not None:
            env["SLURM_JOB_END_TIME"] = str(int(started) + plan.time_limit_s)
    if plan.hide_gpus:
        env["PODIUM_GPUS_HIDDEN"] = "1"  # srun keeps CUDA_VISIBLE_DEVICES empty too
    env["PODIUM_KILL_WAIT_S"] = str(plan.kill_wait_s)
    env["PODIUM_OPEN_MODE"] = plan.open_mode  # srun's steps open files as the job does
    if plan.time_limit_s is not None:
        env["PODIUM_TIME_LIMIT_S"] = str(plan.time_limit_s)
    if plan.checkpoint_dir:
        env["PODIUM_CHECKPOINT_DIR"] = plan.checkpoint_dir
    if heartbeat is not None:
        env["PODIUM_HEARTBEAT_FILE"] = heartbeat
        env["PODIUM_HEARTBEAT_TIMEOUT_S"] = str(plan.heartbeat_timeout_s)
    if plan.replicas is not None:
        env["PODIUM_REPLICAS"] = str(plan.replicas)
        env["PODIUM_RESIZE_COUNT"] = str(plan.resize_count)
    if plan.array_job_id is not None:
        env["PODIUM_ARRAY_JOB_ID"] = str(plan.array_job_id)
        env["PODIUM_ARRAY_TASK_ID"] = str(plan.array_task_id)
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def job_identity(plan: LaunchPlan) -> Identity:
    """The identity the job's files and processes use: the plan's user, groups, umask."""
    return Identity(plan.uid, plan.gid, tuple(plan.groups), plan.umask)
