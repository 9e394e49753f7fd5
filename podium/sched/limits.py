"""What holds a job back other than room: held, --begin, dependencies, array
throttles (`waits_for`), and QoS and account limits (`Counters.limit_reason`)."""

from __future__ import annotations

from podium.api.states import Reason
from podium.sched.deps import DepStatus, evaluate
from podium.sched.model import PendingJob, Policy, Snapshot


class Counters:
    """What running (and, during a pass, started) jobs hold, per limit: GPUs and jobs
    per (QoS, user), GPUs per account, running tasks per array, and which
    (user, name) pairs are taken (singleton dependencies)."""

    def __init__(self) -> None:
        self.user_gpus: dict[tuple[str, str], int] = {}
        self.user_jobs: dict[tuple[str, str], int] = {}
        self.account_gpus: dict[str, int] = {}
        self.array_running: dict[int, int] = {}
        self.singleton_owner: set[tuple[str, str]] = set()

    def count(
        self, qos: str, user: str, account: str, gpus: int, array: int | None, name: str
    ) -> None:
        key = (qos, user)
        self.user_gpus[key] = self.user_gpus.get(key, 0) + gpus
        self.user_jobs[key] = self.user_jobs.get(key, 0) + 1
        self.account_gpus[account] = self.account_gpus.get(account, 0) + gpus
        if array is not None:
            self.array_running[array] = self.array_running.get(array, 0) + 1
        self.singleton_owner.add((user, name))

    def limit_reason(self, job: PendingJob, policy: Policy) -> str | None:
        """The QoS or account limit that holds `job`, or None."""
        limits = policy.qos_limits.get(job.qos)
        if (
            limits is not None
            and limits.max_jobs_per_user is not None
            and self.user_jobs.get((job.qos, job.user), 0) >= limits.max_jobs_per_user
        ):
            return Reason.QOS_JOBS_PER_USER
        return self.gpu_limit_reason(job.qos, job.user, job.account, job.gpus * job.nodes, policy)

    def gpu_limit_reason(
        self, qos: str, user: str, account: str, gpus: int, policy: Policy
    ) -> str | None:
        """The QoS or account GPU limit that `gpus` more for (qos, user, account) would
        pass, or None (also for an elastic job growing: no new job)."""
        limits = policy.qos_limits.get(qos)
        if (
            limits is not None
            and limits.max_gpus_per_user is not None
            and self.user_gpus.get((qos, user), 0) + gpus > limits.max_gpus_per_user
        ):
            return Reason.QOS_GPUS_PER_USER
        cap = policy.account_gpu_limits.get(account)
        if cap is not None and self.account_gpus.get(account, 0) + gpus > cap:
            return Reason.ACCOUNT_GPUS
        return None

    def waits_for(self, job: PendingJob, snapshot: Snapshot, now: float) -> str | None:
        """A reason other than room and limits for `job` to wait, or None."""
        if job.held:
            return Reason.HELD_ADMIN if job.held_by_admin else Reason.HELD
        if job.begin_time is not None and job.begin_time > now:
            return Reason.BEGIN_TIME
        if job.dependencies:
            busy = (job.user, job.name) in self.singleton_owner
            status = evaluate(
                job.dependencies,
                job.dependency_any,
                snapshot.job_states,
                snapshot.array_members,
                busy,
            )
            if any(d.kind == "singleton" for d in job.dependencies):
                self.singleton_owner.add((job.user, job.name))
            if status is DepStatus.NEVER:
                return Reason.DEPENDENCY_NEVER
            if status is DepStatus.WAITING:
                return Reason.DEPENDENCY
        if (
            job.array_job_id is not None
            and job.array_throttle is not None
            and self.array_running.get(job.array_job_id, 0) >= job.array_throttle
        ):
            return Reason.ARRAY_LIMIT
        return None
