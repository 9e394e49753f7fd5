"""One scheduling pass: priority order, gang allocation, backfill, preemption, limits.

Order: multifactor priority (or submit order when `use_priority` is off; `order`). A
job starts only when all its GPUs, CPUs and memory fit at once, on each of its nodes
for a multi-node gang job; nodes are chosen best-fit by free GPUs (`fit`).

Without backfill, the first job of a partition that cannot start blocks every
lower-priority job of that partition (reason Priority). With backfill (EASY), that job
gets a reservation: the earliest time and node at which it fits, judged by the time
limits of running jobs; lower-priority jobs may start now only if they end before the
reservation or leave it enough room, so the reserved job is never delayed by them
(`backfill`).

With preemption, a job that cannot start and whose QoS may preempt others chooses, on
one node, the running jobs of preemptable QoS whose stop loses the fewest GPU-seconds
of work (jobs younger than the exempt time are spared), and holds their resources
(`preempt`). Limits, holds, begin times, dependencies and array throttles: `limits`.

The pass is a `Pass`: its state is named fields, and each job of the order goes
through the stages of podium.sched.stages (in the spirit of Kueue's numbered
scheduling cycle), each a function with one job that either decides the job (DONE),
ends the pass (STOP) or hands it to the next stage (NEXT); after the order, elastic
jobs grow into what is left (`grow`). A new policy is a stage or a key, not another
inline block.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator

from podium.sched.fit import Index, Node, Request
from podium.sched.fragmentation import FragmentationContext, parts_per_gpu, workload_of
from podium.sched.las import attained_by_job, pending_queue
from podium.sched.limits import Counters
from podium.sched.model import (
    Allocation,
    Decisions,
    PendingJob,
    Policy,
    Preempt,
    Reservation,
    Resize,
    Snapshot,
    Start,
)
from podium.sched.order import GroupedOrder, priority_key, queue_order
from podium.sched.preempt import NoVictims
from podium.sched.priority import Factors
from podium.sched.stages import NEXT, STAGES, STOP, Stage, grow
from podium.sched.team_ledger import TeamLedger
from podium.sched.team_share import cohort_order

__all__ = ["Pass", "priority_key", "schedule"]


def schedule(
    snapshot: Snapshot, now: float, policy: Policy | None = None, *, explain: bool = True
) -> Decisions:
    """Decide which pending jobs start now, which running jobs are preempted, and why
    the others wait. With `explain=False` some waiting jobs get no reason (those behind
    a blocked partition, and with `snapshot.groups`, the look-alikes of a job that
    cannot start): a simulator needs only the starts and preemptions, which are the
    same either way.

    Pure: reads only its arguments. Never allocates a GPU twice nor more CPUs or
    memory than a node has; starts all of a job's resources together; never starts a
    job that would delay a reservation.
    """
    return Pass(snapshot, now, policy or Policy(), explain).run()


class Pass:
    """One scheduling pass: what it knows of the cluster and has decided so far, as
    named fields. Every pending job of the order goes through `stages` in turn
    (podium.sched.stages.STAGES: waits, limits, team quota, start now, never fits,
    shrink, preempt, reserve), then running elastic jobs grow (`grow`)."""

    def __init__(
        self,
        snapshot: Snapshot,
        now: float,
        policy: Policy,
        explain: bool,
        stages: tuple[Stage, ...] = STAGES,
    ) -> None:
        self.snapshot, self.now, self.policy, self.explain = snapshot, now, policy, explain
        self.nodes = {
            n.name: Node(n, n.cpus, n.memory_mb, [g.index for g in n.gpus]) for n in snapshot.nodes
        }
        for alloc in snapshot.running:
            if alloc.node in self.nodes:
                self.nodes[alloc.node].take(alloc)
        cohorts = any(t.cohort for t in policy.teams.teams)  # their jobs are re-sequenced
        grouped = (
            GroupedOrder(snapshot, now, policy)
            if not explain and snapshot.groups and not cohorts
            else None
        )
        self.has_limits = bool(policy.qos_limits or policy.account_gpu_limits)
        self.counters = Counters()
        if self.has_limits or (
            grouped.any_counted
            if grouped is not None
            else any(j.dependencies or j.array_throttle is not None for j in snapshot.pending)
        ):  # what running jobs hold matters only to limits, singletons and array throttles
            self._count_running()
        self.ledger = TeamLedger(policy.teams) if policy.teams.teams else None
        if self.ledger is not None:
            self.ledger.count_running(snapshot.running)
        max_gpus = max((len(n.gpus) for n in snapshot.nodes), default=0)
        self.index = Index(
            (n for n in self.nodes.values() if n.view.schedulable),
            max_gpus,
            by_end=policy.placement == "end-aware",
        )
        self.order: Iterable[PendingJob]
        self.priorities: dict[int, Factors]
        if grouped is not None:
            self.order, self.priorities = grouped, {}
            self.partitions, self.any_dependencies = grouped.partitions, grouped.any_dependencies
        else:
            self.order, self.priorities = queue_order(snapshot, now, policy, with_factors=explain)
            if cohorts and self.ledger is not None:
                self.order = cohort_order(self.order, policy.teams, self.ledger.used)
            self.partitions = len({j.partition for j in self.order}) if not explain else 0
            self.any_dependencies = not explain and any(j.dependencies for j in self.order)
        # a grouped order skips a job's look-alikes once it cannot start
        self.drop: Callable[[], None] = grouped.drop if grouped is not None else _keep
        self.drop_as_long: Callable[[float], None] = (
            grouped.drop_as_long if grouped is not None else _keep_as_long
        )
        # what the pass decides
        self.starts: list[Start] = []
        self.reasons: dict[int, str] = {}
        self.cancels: dict[int, str] = {}
        self.preempts: list[Preempt] = []
        self.reservations: list[Reservation] = []
        self.resizes: list[Resize] = []
        # what it learnt on the way
        self.strict_blocked: set[str] = set()  # partitions in strict order behind a job
        self.has_blocked: set[str] = set()  # partitions with a job that could not start
        # partitions where a job overdue by the wait guard could not start: least
        # attained service stops no job there in this pass
        self.overdue_waiting: set[str] = set()
        self.reserved: set[str] = set()  # partitions whose reservation is made
        self.victims: set[int] = {a.job_id for a in snapshot.running if a.preempting}
        self.partition_nodes: dict[str, list[Node]] = {}
        self.no_room: set[Request] = set()  # requests no node can take now
        # Requests that fit now but would delay a reservation, with the shortest time
        # limit that did: holds and free room only shrink during a pass, so no longer
        # job can.
        self.held_back: dict[Request, float] = {}
        self.no_victims = NoVictims()
        self.no_reclaim = NoVictims()  # the same, for teams reclaiming quota
        self.ever_fits: dict[tuple[str, int, int, str | None, int, int], bool] = {}
        self.allowed_sets = {p: frozenset(n) for p, n in snapshot.partition_nodes.items()}
        self.stages = stages
        self._attained: dict[int, float] | None = None
        self._fragmentation: FragmentationContext | None = None

    def overdue(self, job: PendingJob) -> bool:
        """Whether least attained service's wait guard says `job` is overdue now."""
        las = self.policy.las
        return las is not None and las.is_overdue(job, self.now)

    def _count_running(self) -> None:
        """Count what running jobs hold against the limits (a multi-node job once)."""
        per_job: dict[int, tuple[Allocation, int]] = {}  # job -> (an allocation, its GPUs)
        for alloc in self.snapshot.running:
            one, total = per_job.get(alloc.job_id, (alloc, 0))
            per_job[alloc.job_id] = (one, total + len(alloc.gpu_indices))
        for one, total in per_job.values():
            self.counters.count(one.qos, one.user, one.account, total, one.array_job_id, one.name)

    def run(self) -> Decisions:
        """Every job of the order through the stages, then `grow`: the decisions."""
        stages = self.stages
        for job in _each_task(self.order, self.starts):
            verdict = NEXT
            for stage in stages:
                verdict = stage(self, job)
                if verdict is not NEXT:
                    break
            if verdict is STOP:
                break
        grow(self)
        return Decisions(
            resizes=tuple(self.resizes),
            starts=tuple(self.starts),
            reasons=self.reasons,
            cancels=self.cancels,
            preempts=tuple(self.preempts),
            reservations=tuple(self.reservations),
            priorities=self.priorities,
        )

    # -- helpers the stages share --------------------------------------------------

    def team_of(self, job: PendingJob) -> str | None:
        """The team whose rules limit `job`'s victims (None: none do)."""
        if self.ledger is None:
            return None
        team = self.policy.teams.team_of(job.user, job.account)
        return team.name if team is not None else None

    def may_preempt(self, job: PendingJob) -> bool:
        """Whether `job` may still find victims in this pass (by QoS, or by least
        attained service)."""
        policy = self.policy
        return bool(
            policy.preemption and (policy.las is not None or policy.preempts.get(job.qos))
        ) and not self.no_victims.covers(job, self.victim_scope(job))

    def victim_scope(self, job: PendingJob) -> Hashable:
        """What besides its request limits `job`'s victims: its team, and under least
        attained service its queue."""
        team, las = self.team_of(job), self.policy.las
        return team if las is None else (team, pending_queue(job, self.now, las))

    def fragmentation(self) -> FragmentationContext | None:
        """Fragmentation-aware placement's view of this pass (None: best fit)."""
        if self.policy.placement != "fgd":
            return None
        if self._fragmentation is None:
            self._fragmentation = FragmentationContext(
                workload_of(self.snapshot), parts_per_gpu(self.nodes.values())
            )
        return self._fragmentation

    def attained(self) -> dict[int, float]:
        """Each running job's attained GPU-seconds now (least attained service)."""
        if self._attained is None:
            self._attained = attained_by_job(self.snapshot.running, self.now)
        return self._attained

    def candidates_of(self, job: PendingJob) -> list[Node]:
        """The schedulable nodes of `job`'s partition."""
        candidates = self.partition_nodes.get(job.partition)
        if candidates is None:
            allowed = self.allowed_sets.get(job.partition)
            candidates = [
                n
                for n in self.nodes.values()
                if n.view.schedulable and (allowed is None or n.view.name in allowed)
            ]
            self.partition_nodes[job.partition] = candidates
        return candidates

    def drop_look_alikes(self, request: Request) -> None:
        """The job cannot start in this pass: neither can the rest of its group, or
        those of them as long, once the reservation is made (explain=False)."""
        if request in self.no_room:
            self.drop()
        elif request in self.held_back:
            self.drop_as_long(self.held_back[request])


def _each_task(order: Iterable[PendingJob], starts: list[Start]) -> Iterator[PendingJob]:
    """Each job of `order`; a job standing for several tasks (`count`) again after each
    of its tasks that started, until all have or one does not (what held that one
    back holds the rest: its reason is theirs)."""
    for job in order:
        for _ in range(job.count):
            before = len(starts)
            yield job
            if len(starts) == before:
                break


def _keep() -> None:
    """Without groups there is nothing to drop: each job is looked at anyway."""


def _keep_as_long(limit: float) -> None:
    """Likewise."""
