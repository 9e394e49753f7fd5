"""The SLURM_* variables of a job on the embedded cluster, named and formatted as in
the OUTPUT ENVIRONMENT VARIABLES sections of sbatch(1) and srun(1), so that batch
scripts written for Slurm find what they read (`$SLURM_JOB_ID`,
`$SLURM_ARRAY_TASK_ID`, `$SLURM_CPUS_PER_TASK`, ...).

Job-wide variables are made here, when the daemon plans a start; each task's own
(`SLURM_PROCID`, `SLURM_LOCALID`, `SLURM_NODEID`) and the start and end times are
added by the supervisor (`podium.run.task_env`). Variables that Slurm sets for a job
or a step are never inherited from the submitting shell: a job submitted from inside
another job gets its own, not its parent's.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from podium.api import arrays
from podium.jobspec.job import JobSpec
from podium.run.plan import Grant
from podium.server.starting import StartingJob

# Inherited SLURM_* names that describe another job or step (sbatch overrides them).
_NOT_INHERITED_PREFIXES = (
    "SLURM_JOB",
    "SLURM_STEP",
    "SLURM_ARRAY_",
    "SLURM_TASK",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_NNODES",
    "SLURM_NODELIST",
    "SLURM_NODEID",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_GTIDS",
    "SLURM_CPUS",
    "SLURM_GPUS",
    "SLURM_MEM_PER",
    "SLURM_SUBMIT_",
    "SLURM_CLUSTER_NAME",
    "SLURM_RESTART_COUNT",
    "SLURM_PRIO_PROCESS",
    "SLURMD_NODENAME",
)


def without_inherited(env: Mapping[str, str]) -> dict[str, str]:
    """`env` less the SLURM_* variables that describe a job or step (another job's,
    when the submitter ran inside one). Slurm's input variables (SLURM_CONF,
    SLURM_TIME_FORMAT, ...) stay."""
    return {k: v for k, v in env.items() if not k.startswith(_NOT_INHERITED_PREFIXES)}


def per_node(value: int, nodes: int) -> str:
    """Slurm's per-node list form: "4" on one node, "4(x3)" on three alike."""
    return str(value) if nodes == 1 else f"{value}(x{nodes})"


def job_variables(
    job: StartingJob, spec: JobSpec, node: str, grant: Grant, cluster_name: str
) -> dict[str, str]:
    """The job-wide SLURM_* variables of a job starting on `node` with this
    grant. Variables sbatch sets only when an option was given (--ntasks-per-node,
    --gpus and its kin, --mem and its kin) are set only then; SLURM_CPUS_PER_TASK is
    always set (1 unless -c said otherwise), which scripts that test it read the same."""
    job_id, nodes = str(job.job_id), spec.nodes
    gpu_ids, cpus, mem_mb = grant.gpu_ids, grant.cpus, grant.mem_mb
    env = {
        "SLURM_JOB_ID": job_id,
        "SLURM_JOBID": job_id,
        "SLURM_JOB_NAME": job.name,
        "SLURM_JOB_NODELIST": node,
        "SLURM_NODELIST": node,
        "SLURM_JOB_NUM_NODES": str(nodes),
        "SLURM_NNODES": str(nodes),
        "SLURM_NTASKS": str(spec.ntasks),
        "SLURM_NPROCS": str(spec.ntasks),
        "SLURM_TASKS_PER_NODE": per_node(spec.ntasks // nodes, nodes),
        "SLURM_CPUS_ON_NODE": str(cpus),
        "SLURM_JOB_CPUS_PER_NODE": per_node(cpus, nodes),
        "SLURM_GPUS_ON_NODE": str(len(gpu_ids)),
        "SLURM_SUBMIT_DIR": spec.submit_dir,
        "SLURM_SUBMIT_HOST": socket.gethostname(),
        "SLURM_JOB_PARTITION": job.partition,
        "SLURM_JOB_ACCOUNT": job.account,
        "SLURM_JOB_QOS": job.qos,
        "SLURM_JOB_USER": job.user,
        "SLURM_JOB_UID": str(job.uid),
        "SLURM_JOB_GID": str(job.gid),
        "SLURM_CLUSTER_NAME": cluster_name,
        "SLURM_RESTART_COUNT": str(job.restart_count),
        "SLURMD_NODENAME": node,
    }
    if gpu_ids:
        env["SLURM_JOB_GPUS"] = ",".join(str(g) for g in gpu_ids)
    if spec.ntasks_per_node is not None:
        env["SLURM_NTASKS_PER_NODE"] = str(spec.ntasks_per_node)
    env["SLURM_CPUS_PER_TASK"] = str(spec.cpus_per_task)  # sbatch: only with -c; harmless
    if spec.gpus:
        kind = f"{spec.gpu_type}:" if spec.gpu_type else ""
        if spec.gpus_per_node is not None:
            env["SLURM_GPUS_PER_NODE"] = f"{kind}{spec.gpus_per_node}"
        elif spec.gpus_per_task is not None:
            env["SLURM_GPUS_PER_TASK"] = f"{kind}{spec.gpus_per_task}"
        else:
            env["SLURM_GPUS"] = f"{kind}{spec.gpus}"
    if spec.mem_request is not None and spec.mem_request != ("mem", 0):  # as Slurm 22.05
        option, amount = spec.mem_request
        name = {"mem": "SLURM_MEM_PER_NODE", "mem-per-cpu": "SLURM_MEM_PER_CPU"}.get(
            option, "SLURM_MEM_PER_GPU"
        )
        env[name] = str(mem_mb if option == "mem" else amount)
    if job.array_job_id is not None and spec.array is not None:
        ranges = arrays.parse(spec.array.ranges)
        env.update(
            SLURM_ARRAY_JOB_ID=str(job.array_job_id),
            SLURM_ARRAY_TASK_ID=str(job.array_task_id),
            SLURM_ARRAY_TASK_COUNT=str(arrays.count(ranges)),
            SLURM_ARRAY_TASK_MIN=str(arrays.lowest(ranges)),
            SLURM_ARRAY_TASK_MAX=str(max(r[-1] for r in ranges)),
            SLURM_ARRAY_TASK_STEP=str(arrays.stride(ranges)),
        )
    return env
