"""The shape of a job step inside its allocation, read from the job's environment
(SLURM_*, as sbatch and Podium's supervisor set them): the allocation, the step checked
against it as Slurm checks it, and each task's environment. Standard library only:
srun loads it at every step.
"""

from __future__ import annotations

from podium.run.task_env import SLICE_PER_TASK, cuda_visible

TYPE_CHECKING = False  # not `typing`'s: srun's start-up stays small
if TYPE_CHECKING:
    from podium.jobsteps.srun_options import StepOptions


class StepError(Exception):
    """The step cannot be created in this allocation (the reason is the message)."""


def _int(env: dict[str, str], name: str, default: int) -> int:
    value = env.get(name, "")
    head = value.split("(")[0].split(",")[0]  # SLURM_TASKS_PER_NODE "2(x3)" forms
    return int(head) if head.isdigit() else default


class Allocation:
    """The job this srun runs in, as its environment describes it."""

    def __init__(self, env: dict[str, str]) -> None:
        self.job_id = int(env["SLURM_JOB_ID"])
        self.name = env.get("SLURM_JOB_NAME", "")
        self.user = env.get("SLURM_JOB_USER", "")
        self.node = env.get("SLURMD_NODENAME") or env.get("SLURM_JOB_NODELIST", "")
        self.nodes = _int(env, "SLURM_JOB_NUM_NODES", 1)
        self.ntasks = _int(env, "SLURM_NTASKS", 1)
        self.cpus = _int(env, "SLURM_CPUS_ON_NODE", self.ntasks)
        self.cpus_per_task = _int(env, "SLURM_CPUS_PER_TASK", 1)
        # "1g.10gb:2" or "2": the count after the type, as sbatch writes it
        per_task = env.get("SLURM_GPUS_PER_TASK", "").rpartition(":")[2]
        self.gpus_per_task = int(per_task) if per_task.isdigit() else 0
        # a job holding several MIG slices: each task its own (CUDA uses one per process)
        self.slice_per_task = env.get(SLICE_PER_TASK) == "1"
        job_gpus = env.get("SLURM_JOB_GPUS", "")
        self.gpus = [int(g) for g in job_gpus.split(",") if g.isdigit()]
        self.hide_gpus = env.get("PODIUM_GPUS_HIDDEN") == "1"
        self.kill_wait = float(env.get("PODIUM_KILL_WAIT_S") or 30)
        array_job = env.get("SLURM_ARRAY_JOB_ID")
        array_task = env.get("SLURM_ARRAY_TASK_ID")
        self.array_job_id = int(array_job) if array_job and array_job.isdigit() else None
        self.array_task_id = int(array_task) if array_task and array_task.isdigit() else None

    def names(self) -> dict[str, object]:
        """What output patterns expand to (%j, %x, %u, %N, %A, %a)."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "user": self.user,
            "node": self.node,
            "array_job_id": self.array_job_id,
            "array_task_id": self.array_task_id,
        }


class Step:
    """One step's shape, checked against the allocation."""

    def __init__(self, opts: StepOptions, alloc: Allocation) -> None:
        if opts.nodes is not None and opts.nodes > alloc.nodes:
            raise StepError(
                f"Requested node configuration is not available: {opts.nodes} node(s) "
                f"asked, the job has {alloc.nodes}"
            )
        if opts.ntasks is not None:
            ntasks = opts.ntasks
        elif opts.ntasks_per_node is not None:
            ntasks = opts.ntasks_per_node * (opts.nodes or alloc.nodes)
        elif opts.nodes is not None and opts.nodes < alloc.nodes:
            ntasks = opts.nodes  # one task per node asked
        else:
            ntasks = alloc.ntasks
        cpt = opts.cpus_per_task or (alloc.cpus_per_task if opts.ntasks is None else 1)
        if ntasks * cpt > alloc.cpus and not opts.overcommit:
            raise StepError(
                f"More processors requested than permitted: {ntasks} task(s) x {cpt} CPU(s),"
                f" the job has {alloc.cpus} CPU(s) (fewer tasks, or --overcommit)"
            )
        gpt = opts.gpus_per_task if opts.gpus_per_task is not None else alloc.gpus_per_task
        if opts.gpus is not None:
            if opts.gpus > len(alloc.gpus):
                raise StepError(f"{opts.gpus} GPU(s) asked, the job has {len(alloc.gpus)}")
            step_gpus = alloc.gpus[: opts.gpus]
            gpt = 0 if opts.gpus_per_task is None else gpt
        else:
            step_gpus = alloc.gpus[: ntasks * gpt] if gpt else list(alloc.gpus)
        if gpt and ntasks * gpt > len(step_gpus):
            raise StepError(
                f"{ntasks} task(s) x {gpt} GPU(s) per task asked, "
                f"the step has {len(step_gpus)} GPU(s)"
            )
        self.ntasks, self.cpus_per_task, self.gpus_per_task = ntasks, cpt, gpt
        self.gpus = step_gpus
        self.slice_per_task = alloc.slice_per_task and not gpt and len(step_gpus) > 1

    def task_gpus(self, rank: int) -> list[int]:
        """The GPUs task `rank` sees: its own --gpus-per-task, its own MIG slice in a
        job of several (round robin when the step has more tasks), else the step's."""
        if self.gpus_per_task:
            return self.gpus[rank * self.gpus_per_task : (rank + 1) * self.gpus_per_task]
        if self.slice_per_task:
            return [self.gpus[rank % len(self.gpus)]]
        return self.gpus


def task_env(
    base: dict[str, str], alloc: Allocation, step: Step, step_id: int, rank: int, port: int
) -> dict[str, str]:
    """One task's environment: the job's, plus the step's and the task's variables as
    srun(1) names them, and torch's."""
    env = dict(base)
    n = str(step.ntasks)
    gpus = ",".join(str(g) for g in step.gpus)
    env.update(
        SLURM_STEP_ID=str(step_id),
        SLURM_STEPID=str(step_id),
        SLURM_PROCID=str(rank),
        SLURM_LOCALID=str(rank),
        SLURM_NODEID="0",
        SLURM_NTASKS=n,
        SLURM_NPROCS=n,
        SLURM_TASKS_PER_NODE=n,
        SLURM_STEP_NUM_TASKS=n,
        SLURM_STEP_NUM_NODES="1",
        SLURM_STEP_NODELIST=alloc.node,
        SLURM_STEP_TASKS_PER_NODE=n,
        SLURM_GTIDS=",".join(str(i) for i in range(step.ntasks)),
        SLURM_CPUS_PER_TASK=str(step.cpus_per_task),
        SLURM_DISTRIBUTION="block",
        SLURM_SRUN_COMM_HOST="127.0.0.1",
        SLURM_LAUNCH_NODE_IPADDR="127.0.0.1",
        PODIUM_STEP_ID=str(step_id),
        PODIUM_PROCID=str(rank),
        PODIUM_LOCALID=str(rank),
        PODIUM_NTASKS=n,
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=n,
        LOCAL_WORLD_SIZE=n,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    if gpus:
        env["SLURM_STEP_GPUS"] = gpus
    if not alloc.hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible(step.task_gpus(rank), env)
    return env


__all__ = ["Allocation", "Step", "StepError", "task_env"]
