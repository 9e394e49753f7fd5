"""The data the scheduler reads (a Snapshot) and writes (Decisions). Plain and frozen."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from podium.api.elastic_sizes import elastic_sizes
from podium.api.states import Exclusive, PreemptMode
from podium.jobspec.job import Dependency
from podium.sched.priority import Factors, PriorityWeights


@dataclass(frozen=True)
class QosLimits:
    """Per-user limits of one QoS (Slurm's MaxTRESPerUser=gres/gpu, MaxJobsPerUser)."""

    max_gpus_per_user: int | None = None
    max_jobs_per_user: int | None = None


@dataclass(frozen=True)
class TeamQuota:
    """One team's GPU quota as the scheduler sees it (config.team_config.Team, flattened;
    the arithmetic is in `team_ledger`)."""

    name: str
    quota: int
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    weight: float = 1.0
    users: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()
    reclaim_within_cohort: str = "any"
    within_team: str = "never"

    @property
    def lendable(self) -> int:
        """What it puts into its cohort's pool."""
        if self.cohort is None:
            return 0
        return self.quota if self.lending_limit is None else min(self.quota, self.lending_limit)

    @property
    def guaranteed(self) -> int:
        """What of its quota only it may use."""
        return self.quota - self.lendable


@dataclass(frozen=True)
class TeamRules:
    """Every team, each QoS's priority (to judge "lower priority"), and whether teams
    borrow by weight (`fair_sharing`, `podium.sched.team_share`) or in priority order."""

    teams: tuple[TeamQuota, ...] = ()
    qos_priority: Mapping[str, int] = field(default_factory=dict)
    fair_sharing: bool = False

    def team_of(self, user: str, account: str) -> TeamQuota | None:
        """The team a job is charged to: its account's team, else its user's; None
        when neither is in a team."""
        for team in self.teams:
            if account in team.accounts:
                return team
        for team in self.teams:
            if user in team.users:
                return team
        return None


@dataclass(frozen=True)
class LasRules:
    """Least attained service (`podium.sched.las`): the queues' limits in attained
    GPU-seconds (ascending), the thrash bound and the starvation guard (None: none)."""

    queue_limits_gpu_s: tuple[float, ...] = (4000.0,)
    min_run_s: float = 7200.0
    starve_factor: float | None = 0.5
    # the wait guard: a job is overdue once it has waited its time limit times
    # `wait_factor`, at least `wait_floor_s` and at most `wait_cap_s` (a job with no
    # limit: the cap), and a later job has started ahead of it; overdue jobs go before
    # the others of their partition tier, the earliest due first (None: no guard)
    wait_factor: float | None = 0.25
    wait_floor_s: float = 300.0
    wait_cap_s: float = 86400.0

    def wait_allowed_s(self, time_limit_s: float | None) -> float:
        """How long the wait guard lets a job of this time limit wait beyond its place
        in submit order, all its stays in the queue together: `wait_factor` times the
        limit, at least `wait_floor_s`, at most `wait_cap_s` (the cap with no limit)."""
        if time_limit_s is None or self.wait_factor is None:
            return self.wait_cap_s
        return min(self.wait_cap_s, max(self.wait_factor * time_limit_s, self.wait_floor_s))

    def overdue_at(self, job: PendingJob) -> float | None:
        """When `job` becomes overdue (the wait guard): once it has waited its allowance
        (`wait_allowed_s`) since it joined the queue, its waits in earlier stays counted
        (`PendingJob.waited_s`: a job that was stopped has spent part of it), and not
        before a job submitted after it first started while it waited
        (`PendingJob.passed_at`). None: no guard, or nobody has passed it (it waits no
        longer than in submit order). The due time is also its place among overdue
        jobs: a job's allowance bounds how far later jobs can go before it."""
        since = job.passed_at
        if self.wait_factor is None or since is None:
            return None
        return max(since, job.joined_at + self.wait_allowed_s(job.time_limit_s) - job.waited_s)

    def spent_wait(self, alloc: Allocation) -> bool:
        """Whether a running job had waited its whole allowance (`wait_allowed_s`)
        before this run (`Allocation.waited_s`): least attained service lets it run to
        its end, so that stops and waits cannot add up without bound."""
        return self.wait_factor is not None and alloc.waited_s >= self.wait_allowed_s(
            alloc.time_limit_s
        )

    def is_overdue(self, job: PendingJob, now: float) -> bool:
        """Whether the wait guard puts `job` before the others of its tier at `now`."""
        due = self.overdue_at(job)
        return due is not None and now >= due

    def queue_of(self, attained_gpu_s: float) -> int:
        """The queue of a job that has had `attained_gpu_s` of service."""
        return bisect_right(self.queue_limits_gpu_s, attained_gpu_s)


@dataclass(frozen=True)
class Policy:
    """What a pass may do. The default is the daemon's: priority order, backfill and
    preemption, no limits. `use_priority=False` is plain FIFO (submit order)."""

    use_priority: bool = True
    backfill: bool = True
    preemption: bool = True
    weights: PriorityWeights = field(default_factory=PriorityWeights)
    preempts: Mapping[str, frozenset[str]] = field(default_factory=dict)
    preempt_mode: Mapping[str, PreemptMode] = field(default_factory=dict)
    preempt_exempt_s: float = 0.0
    qos_limits: Mapping[str, QosLimits] = field(default_factory=dict)
    account_gpu_limits: Mapping[str, int] = field(default_factory=dict)
    partition_tiers: Mapping[str, int] = field(default_factory=dict)
    qos_priority: Mapping[str, int] = field(default_factory=dict)
    elastic_min_stable_s: float = 300.0  # a resized job is not shrunk again before, ...
    elastic_grow_delay_s: float = 60.0  # ... nor grown (unless a higher QoS waits)
    teams: TeamRules = field(default_factory=lambda: TeamRules())
    las: LasRules | None = None  # order and preempt by least attained service instead
    # where a job starts among the nodes it fits now (podium.sched.fit): "best-fit" (fewest
    # free GPUs first), "end-aware" (best fit, then the node whose jobs end last) or "fgd"
    # (where it fragments least: podium.sched.fragmentation)
    placement: str = "best-fit"

    @property
    def may_preempt(self) -> bool:
        """Whether any pass could preempt: a QoS that preempts others, least attained
        service, or a team that reclaims lent quota or preempts its own lower-priority
        jobs."""
        return self.preemption and (
            self.las is not None
            or any(self.preempts.values())
            or any(
                (t.cohort is not None and t.reclaim_within_cohort != "never")
                or t.within_team != "never"
                for t in self.teams.teams
            )
        )


@dataclass(frozen=True)
class GpuSlot:
    """One GPU of a node, by its index as CUDA_VISIBLE_DEVICES names it, or one part of
    a GPU (`whole` False, `parent` the GPU): a MIG slice (`type` its profile), a shard
    ("shard") or an MPS unit ("mps"). A job that names no GPU type gets whole GPUs;
    parts are asked for by type (--gres=gpu:1g.10gb:1, --gres=shard:1, --gres=mps:50).
    An MPS share comes from one GPU, never shared with another user's MPS jobs."""

    index: int
    type: str
    whole: bool = True
    parent: int | None = None


@dataclass(frozen=True)
class NodeView:
    """A node as the scheduler sees it. `schedulable` is False when drained or down."""

    name: str
    cpus: int
    memory_mb: int
    gpus: tuple[GpuSlot, ...] = ()
    schedulable: bool = True
    gpu_groups: tuple[tuple[int, ...], ...] = ()  # GPUs sharing an NVLink/PCIe switch


@dataclass(frozen=True)
class Elastic:
    """An elastic job's replicas: from `min` to `max` (`cap` at most, after a resize
    chose its next size) in steps of `step`, each replica holding `gpus`, `cpus` and
    `mem_mb`; and `spares` replicas' worth more, held idle to replace a failed one."""

    min: int
    max: int
    step: int
    gpus: int
    cpus: int
    mem_mb: int
    spares: int = 0

    def sizes(self) -> list[int]:
        """Every size it may start at, largest first (`jobspec.job.elastic_sizes`)."""
        return elastic_sizes(self.min, self.max, self.step)

    def replicas_of(self, cpus: int) -> int:
        """How many replicas `cpus` CPUs are (a start holds whole replicas), its
        spares not counted."""
        return max(0, cpus // self.cpus - self.spares)

    def held(self, replicas: int) -> tuple[int, int, int]:
        """GPUs, CPUs and memory a start of `replicas` replicas holds, spares included."""
        n = replicas + self.spares
        return n * self.gpus, n * self.cpus, n * self.mem_mb


@dataclass(frozen=True)
class Allocation:
    """Resources a running job holds on a node."""

    job_id: int
    node: str
    user: str
    gpu_indices: tuple[int, ...] = ()
    cpus: int = 1
    mem_mb: int = 0
    exclusive: Exclusive = Exclusive.NONE
    name: str = ""
    array_job_id: int | None = None
    array_task_id: int | None = None  # as users name it: ARRAY_TASK (blockers' sentences)
    qos: str = ""
    account: str = ""
    start_time: float = 0.0
    time_limit_s: float | None = None
    preempting: bool = False
    starting: bool = False  # started by this very pass: no victim, no shrink
    gpu_units: float | None = None  # GPUs charged when it holds parts of GPUs (MIG, MPS)
    checkpoint_time: float | None = None  # its newest checkpoint of this run (None: none)
    elastic: Elastic | None = None  # its replicas' range (an elastic job; resized in place)
    ending: bool = False  # its end is given (cancelled): its processes are being stopped
    expected_end: float | None = None  # when its reported progress says it ends (podium progress)
    attained_gpu_s: float = 0.0  # GPU-seconds of its earlier runs (least attained service)
    saves: bool = False  # it saves when told to stop and comes back (LAS may stop it)
    waited_s: float = 0.0  # seconds between its submission and this run, not running

    @property
    def replicas(self) -> int:
        """How many replicas it runs (1 for a job that is not elastic)."""
        return 1 if self.elastic is None else self.elastic.replicas_of(self.cpus)

    @property
    def gpu_amount(self) -> float:
        """The GPUs fair share charges it for: its parts' fractions, else its count."""
        return len(self.gpu_indices) if self.gpu_units is None else self.gpu_units

    def end_time(self) -> float | None:
        """When it is expected to end: at its time limit, or earlier where the progress
        it reports says so (None: no limit and no such word). Always finite: an end
        that is not (an absurd limit or report) counts as none."""
        limit = None if self.time_limit_s is None else self.start_time + self.time_limit_s
        said = self.expected_end
        if said is None or not math.isfinite(said):
            end = limit
        else:
            end = said if limit is None else min(limit, said)
        return end if end is not None and math.isfinite(end) else None

    def lost_work(self, now: float) -> float:
        """GPU-seconds stopping it now would lose: its GPUs times the time since its
        newest checkpoint of this run (since its start when it has none)."""
        since = self.start_time
        if self.checkpoint_time is not None and self.checkpoint_time > since:
            since = min(self.checkpoint_time, now)
        return len(self.gpu_indices) * max(0.0, now - since)

    @property
    def end_estimate(self) -> float:
        """When the job will have ended at the latest (its time limit), inf if unlimited."""
        if self.time_limit_s is None:
            return float("inf")
        return self.start_time + self.time_limit_s


@dataclass(frozen=True)
class PendingJob:
    """A job waiting to start, with what it asks for and what it waits on.

    `gpus`, `cpus` and `mem_mb` are what it needs on each of its `nodes` nodes (a gang:
    all nodes start together or none does). `count` is how many like tasks it stands
    for: a pending array's tasks not yet started, which a pass may start several of
    (each its own Start with this job id), in turn, for as long as one fits."""

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
    exclusive: Exclusive = Exclusive.NONE
    nice: int = 0
    held: bool = False
    held_by_admin: bool = False  # JobHeldAdmin: only an administrator releases it
    begin_time: float | None = None
    dependencies: tuple[Dependency, ...] = ()
    dependency_any: bool = False
    kill_on_invalid_dep: bool = False
    array_job_id: int | None = None
    array_task_id: int | None = None  # a task's own row (requeued): ARRAY_TASK to users
    array_throttle: int | None = None
    qos: str = ""
    account: str = ""
    time_limit_s: float | None = None
    avoid_gpus: frozenset[tuple[str, int]] = frozenset()  # (node, GPU) it must not get
    nodes: int = 1
    count: int = 1
    elastic: Elastic | None = None  # its replicas' range; gpus, cpus, mem_mb: MIN's
    expedite: bool = False  # requeued after a failure: it goes first (`podium.sched.order`)
    attained_gpu_s: float = 0.0  # GPU-seconds of its earlier runs (least attained service)
    queued_at: float | None = None  # when it last joined the queue (None: at its submit)
    # when a job submitted after it first started while it waited (this stay in the
    # queue): least attained service's wait guard counts from then (podium.sched.passed)
    passed_at: float | None = None
    # seconds it waited before it last joined the queue, not running (its earlier
    # stays: 0 for a job that never ran); the wait guard counts them (LasRules)
    waited_s: float = 0.0

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.nodes

    @property
    def joined_at(self) -> float:
        """When it last joined the queue: its requeue, else its submission."""
        return self.submit_time if self.queued_at is None else self.queued_at

    def allocate(self, node: str, gpu_indices: tuple[int, ...], now: float) -> Allocation:
        """What this job holds once started on `node` with these GPUs at `now`."""
        return Allocation(
            job_id=self.job_id,
            node=node,
            user=self.user,
            gpu_indices=gpu_indices,
            cpus=self.cpus,
            mem_mb=self.mem_mb,
            exclusive=self.exclusive,
            name=self.name,
            array_job_id=self.array_job_id,
            array_task_id=self.array_task_id,
            qos=self.qos,
            account=self.account,
            start_time=now,
            time_limit_s=self.time_limit_s,
            elastic=self.elastic,
            attained_gpu_s=self.attained_gpu_s,
            waited_s=self.waited_s + max(0.0, now - self.joined_at),
        )


@dataclass
class PendingGroup:
    """Pending jobs alike in everything that orders them and in what they ask
    (`order.group_of`), in submit order. `shortest[i]` is the shortest time limit
    (infinite for none) among `jobs[i:]`. Kept by `order.PendingGroups`."""

    jobs: list[PendingJob] = field(default_factory=list)
    shortest: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Snapshot:
    """Everything one scheduling pass may look at.

    `job_states` maps job ids that pending jobs depend on to their state name;
    `array_members` maps an array's id to the job ids of its tasks. `partition_nodes`
    maps a partition to its node names (absent: every node). `fairshare` maps
    (account, user) to its fair-share factor in [0, 1] (absent: 1).
    `in_submit_order` says `pending` is already sorted by (submit_time, job_id): FIFO
    then keeps that order without sorting again (a caller that keeps its queue sorted
    saves a sort per pass). `groups`, when given, holds the same jobs as `pending`
    grouped by `order.group_of`, each group in submit order (`order.PendingGroups`
    keeps them): a pass with `explain=False` then walks the queue group by group.
    """

    nodes: tuple[NodeView, ...]
    running: tuple[Allocation, ...] = ()
    pending: tuple[PendingJob, ...] = ()
    job_states: Mapping[int, str] = field(default_factory=dict)
    array_members: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    partition_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fairshare: Mapping[tuple[str, str], float] = field(default_factory=dict)
    in_submit_order: bool = False
    groups: Sequence[PendingGroup] | None = None
    # the kinds of request expected, (GPU type, count, weight), for fragmentation-aware
    # placement (`podium.sched.fragmentation`); empty: the pending jobs' own mix
    workload: tuple[tuple[str | None, int, float], ...] = ()


@dataclass(frozen=True)
class Start:
    """Decision: start `job_id` on `node` with exactly these GPUs, CPUs and memory;
    a multi-node job also on `more` ((node, GPUs) each, the same CPUs and memory)."""

    job_id: int
    node: str
    gpu_indices: tuple[int, ...]
    cpus: int
    mem_mb: int
    more: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def placements(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """Every (node, GPUs) of the start, the first node first."""
        return ((self.node, self.gpu_indices), *self.more)


@dataclass(frozen=True)
class Preempt:
    """Decision: stop running job `job_id` so that `for_job` can start; `mode` is
    "requeue" (back to the queue, checkpoint kept) or "cancel"."""

    job_id: int
    for_job: int
    mode: PreemptMode


@dataclass(frozen=True)
class Resize:
    """Decision: stop elastic job `job_id` and start it again at `replicas` (a shrink
    for job `for_job`, or a grow into free GPUs when `for_job` is None)."""

    job_id: int
    replicas: int
    cause: str
    for_job: int | None = None


@dataclass(frozen=True)
class Reservation:
    """Where and when the highest-priority blocked job of a partition will start."""

    job_id: int
    node: str
    start_time: float


@dataclass(frozen=True)
class Decisions:
    """The outcome of a pass: jobs to start, jobs to preempt, why each other pending job
    waits, reservations held for blocked jobs, jobs to cancel because their dependency
    can never be satisfied, every pending job's priority factors, and elastic jobs to
    resize."""

    starts: tuple[Start, ...] = ()
    reasons: Mapping[int, str] = field(default_factory=dict)
    cancels: Mapping[int, str] = field(default_factory=dict)
    preempts: tuple[Preempt, ...] = ()
    reservations: tuple[Reservation, ...] = ()
    priorities: Mapping[int, Factors] = field(default_factory=dict)
    resizes: tuple[Resize, ...] = ()
