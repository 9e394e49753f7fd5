"""Replay a trace on a virtual clock through `podium.sched.schedule`, unchanged.

Events are arrivals and completions; after the events of one instant, one scheduling
pass runs (again while it preempts, so freed GPUs are used at once). A preempted job
loses the work done since its last checkpoint (`checkpoint_interval_s`; 0 means it
loses nothing; a job that does not checkpoint, `SimOptions.checkpointing`, loses all)
and is requeued with its remaining work. A share of the jobs may be
elastic (`podium.sim.elastic_replay`): the scheduler's resizes stop them and start
them again at the new size, keeping their work; every restart costs
`restart_cost_s` of no progress. A job asking for more GPUs
than the largest node has is a multi-node gang job: `gang_shape` spreads it evenly
over as few nodes as hold it, and all its nodes start together. Jobs that fit no set
of nodes are reported as unschedulable and not replayed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from podium.sched import Allocation, Snapshot
from podium.sched.model import LasRules, Policy, TeamRules
from podium.sched.priority import PriorityWeights
from podium.sim.traces import TraceJob, TraceNode, picked_evenly

QOS_PRIORITY = {"high": 1000, "normal": 100, "low": 10}
NO_FAIRSHARE = PriorityWeights(fairshare=0.0)
WITH_FAIRSHARE = PriorityWeights(fairshare=100000.0, qos=100000.0)
PREEMPTS = {"high": frozenset({"low"})}
# least requested GPU-time first, by levels, and any job pending a day counts as the
# shortest (docs/scheduling.md: `weight_shortness: 10000`, `starve_after: 1-0`)
SHORTEST_FIRST = PriorityWeights(fairshare=0.0, shortness=10000.0, starve_after_s=86400.0)

POLICIES: dict[str, Policy] = {
    "fifo": Policy(use_priority=False, backfill=False, preemption=False),
    "fifo-backfill": Policy(use_priority=False, backfill=True, preemption=False),
    "priority": Policy(backfill=False, preemption=False, weights=NO_FAIRSHARE),
    "backfill": Policy(backfill=True, preemption=False, weights=NO_FAIRSHARE),
    "preempt": Policy(backfill=True, preemption=True, weights=NO_FAIRSHARE, preempts=PREEMPTS),
    "fairshare": Policy(backfill=True, preemption=True, weights=WITH_FAIRSHARE, preempts=PREEMPTS),
    "shortest-first": Policy(backfill=True, preemption=False, weights=SHORTEST_FIRST),
    # least attained service with the daemon's defaults (`scheduler.order: las`), placed
    # end-aware among nodes (a choice the one-node embedded daemon never has to make)
    "las": Policy(
        backfill=True,
        preemption=True,
        weights=NO_FAIRSHARE,
        las=LasRules(),
        qos_priority=QOS_PRIORITY,
        placement="end-aware",
    ),
}


def policy_of(name: str, options: SimOptions) -> Policy:
    """The named policy (see POLICIES) as `options` replay it: with their team quotas,
    and their placement where they name one."""
    policy = replace(POLICIES[name], teams=options.teams)
    return policy if options.placement is None else replace(policy, placement=options.placement)


@dataclass(frozen=True)
class SimOptions:
    """`pass_interval_s` > 0 runs at most one scheduling pass per interval (like Slurm's
    sched_min_interval), instead of one after every event."""

    checkpoint_interval_s: float = 600.0
    time_limit_factor: float = 1.0
    fairshare_half_life_s: float = 7 * 86400.0
    pass_interval_s: float = 0.0
    sharing: str = "whole"  # how fractional GPU requests are served (podium.sim.sharing)
    mps_units: int = 10  # per shared GPU: 10 % steps (100 slows the replay ten-fold)
    teams: TeamRules = field(default_factory=TeamRules)  # team quotas (none: no quotas)
    elastic_share: float = 0.0  # of the jobs of 2 to a node's GPUs: elastic (elastic_replay)
    elastic_mode: str = "shrink"  # requeue, shrink or shrink-ckpt (elastic_replay.MODES)
    restart_cost_s: float = 0.0  # no progress after each restart (requeue or resize)
    # least attained service: a job that checkpoints saves when preempted, holding its
    # GPUs this long after the signal (its save), and keeps all its work
    save_s: float = 0.0
    # the share of jobs that checkpoint where the trace does not say (TraceJob.checkpoints),
    # picked evenly by job id: least attained service stops only those, and a job that
    # does not checkpoint loses all its work when QoS preemption stops it
    checkpointing: float = 1.0
    placement: str | None = None  # Policy.placement for every policy (None: each its own)
    # running jobs report their progress at a steady rate (podium progress): a run's end
    # is known this long after it starts (None: no job reports, ends are the limits')
    progress_after_s: float | None = None


@dataclass
class JobOutcome:
    """What happened to one job."""

    job: TraceJob
    first_start: float | None = None
    end: float | None = None
    gpu_seconds: float = 0.0
    lost_seconds: float = 0.0
    preemptions: int = 0
    contenders_at_arrival: int = 1
    elastic: bool = False  # one of the jobs picked to be elastic (also in `requeue`)
    resizes: int = 0


@dataclass
class SimResult:
    policy: str
    outcomes: list[JobOutcome]
    unschedulable: list[TraceJob]
    total_gpus: int
    preemptions: int
    passes: int = 0
    resizes: int = 0


@dataclass
class _Run:
    allocs: list[Allocation]
    token: int
    started: float
    overhead: float = 0.0  # seconds of restart before it makes progress
    replicas: int = 0  # an elastic run's size (0: not elastic)
    end: float = math.inf  # when it ends in the replay

    def progress(self, now: float) -> float:
        """Seconds of progress it made by `now`."""
        return max(0.0, now - self.started - self.overhead)


@dataclass
class _State:
    remaining: dict[int, float] = field(default_factory=dict)  # elastic: replica-seconds
    tokens: dict[int, int] = field(default_factory=dict)
    caps: dict[int, int] = field(default_factory=dict)  # elastic job -> its next size at most


def gang_shape(job: TraceJob, node_gpus: int) -> tuple[int, int, int, int]:
    """(nodes, GPUs, CPUs, MiB per node) for `job` on nodes of `node_gpus` GPUs: one
    node when it fits one, else the fewest nodes that hold its GPUs, shared evenly
    (rounded up, as Slurm's --gpus-per-node would be given)."""
    if job.gpus <= node_gpus or node_gpus == 0:
        return 1, job.gpus, job.cpus, job.mem_mb
    count = -(-job.gpus // node_gpus)
    return count, -(-job.gpus // count), -(-job.cpus // count), -(-job.mem_mb // count)


def _fits_somewhere(job: TraceJob, nodes: list[TraceNode]) -> bool:
    count, gpus, cpus, mem = gang_shape(job, max((n.gpus for n in nodes), default=0))
    fitting = sum(1 for n in nodes if gpus <= n.gpus and cpus <= n.cpus and mem <= n.mem_mb)
    return fitting >= count


def simulate(
    trace: list[TraceJob],
    nodes: list[TraceNode],
    policy_name: str,
    options: SimOptions,
    on_arrival: Callable[[Snapshot, float, list[int]], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Replay `trace` on `nodes` under the named policy (see POLICIES). With
    `on_arrival`, after the arrivals of each instant and before its pass, it is called
    with the snapshot a pass would read then, the time and the arrived job ids (what a
    forecast at submission sees: `podium.sim.forecast_error`). With `on_progress`, it is
    called with the jobs finished so far and the jobs replayed, at each instant that
    finished one (what a long replay shows on the terminal)."""
    from podium.sim.replay import Hooks, Replay  # it reads this module's types: here

    return Replay(trace, nodes, policy_name, options, Hooks(on_arrival, on_progress)).run()


def uniform_nodes(
    count: int, gpus: int, cpus: int, mem_mb: int, gpu_type: str = "gpu"
) -> list[TraceNode]:
    """`count` identical nodes."""
    return [TraceNode(f"node{i:04d}", gpus, cpus, mem_mb, gpu_type) for i in range(count)]


def checkpoints(job: TraceJob, share: float) -> bool:
    """Whether `job` saves when stopped: as its trace says, else whether it is one of the
    `share` of the jobs picked evenly by job id."""
    if job.checkpoints is not None:
        return job.checkpoints
    return picked_evenly(job, share)


__all__ = [
    "POLICIES",
    "SimOptions",
    "SimResult",
    "checkpoints",
    "policy_of",
    "simulate",
    "uniform_nodes",
]
