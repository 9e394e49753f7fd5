"""Job states and pending reasons as Slurm names them, and which states are final.
Standard library only: the lean client, the scheduler and the backends all read it."""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    """Slurm's job states. `is_terminal()` says whether a job in it is over."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"  # running, its end given (scancel): its processes being stopped
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"  # a passage back to PENDING, not an end
    OUT_OF_MEMORY = "OUT_OF_MEMORY"

    def is_terminal(self) -> bool:
        return self not in (
            JobState.PENDING,
            JobState.RUNNING,
            JobState.COMPLETING,
            JobState.REQUEUED,
        )


#: The names of the states a job never leaves.
TERMINAL_STATES = frozenset(s.value for s in JobState if s.is_terminal())


class Reason(StrEnum):
    """Why a pending job waits, in Slurm's words (squeue's REASON)."""

    PRIORITY = "Priority"
    RESOURCES = "Resources"
    DEPENDENCY = "Dependency"
    DEPENDENCY_NEVER = "DependencyNeverSatisfied"
    HELD = "JobHeldUser"  # held by its user (sbatch -H, scontrol hold)
    HELD_ADMIN = "JobHeldAdmin"  # held by an administrator: only one releases it
    BEGIN_TIME = "BeginTime"
    ARRAY_LIMIT = "JobArrayTaskLimit"
    NODE_UNAVAILABLE = "ReqNodeNotAvail"
    QOS_GPUS_PER_USER = "QOSMaxGRESPerUser"
    QOS_JOBS_PER_USER = "QOSMaxJobsPerUserLimit"
    ACCOUNT_GPUS = "AssocGrpGRES"
    NONE = "None"


__all__ = ["TERMINAL_STATES", "JobState", "Reason"]


class Exclusive(StrEnum):
    """--exclusive: share the node with anyone, with no one, or only with the same user."""

    NONE = "none"
    NODE = "node"
    USER = "user"


class PreemptMode(StrEnum):
    """What preemption does to a victim (Slurm's PreemptMode): back to the queue, or
    cancelled."""

    REQUEUE = "requeue"
    CANCEL = "cancel"
