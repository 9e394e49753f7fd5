"""Why a pending job is not running, in plain words: which jobs hold what it waits for
and when they end, which limit or quota holds it, which dependency, which fenced GPU,
which part of its layout no node can hold (what `podium show` and the dashboard say).

Pure: reads a `Snapshot`, the job's reason from the last pass (Slurm's words, as
`sched.schedule` gives them), the forecast's expected start (`sim.forecast`, passed in
as plain values) and what the node's health fences; never the clock. Each blocker is
one sentence with the job ids and times it names, so a page can link and format them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from podium.api.states import Reason
from podium.sched.deps import DepStatus, evaluate
from podium.sched.fit import could_ever_fit
from podium.sched.model import Allocation, NodeView, PendingJob, Policy, Snapshot
from podium.sched.order import queue_order

MAX_NAMED = 5  # jobs named in one sentence; the rest are counted


@dataclass(frozen=True)
class Blocker:
    """One thing that keeps a job from starting: `kind` (gpus, priority, limit, quota,
    dependency, held, begin, array, fenced, layout, forecast), the sentence, the jobs it
    names and the time it ends, when it has one (epoch seconds)."""

    kind: str
    text: str
    job_ids: tuple[int, ...] = ()
    until: float | None = None


@dataclass(frozen=True)
class ExpectedStart:
    """Where and when the forecast expects the job to start."""

    start: float
    node: str
    gpu_indices: tuple[int, ...]


def within(seconds: float) -> str:
    """A span from now in words: "in 40 s", "in 12 min", "in 2 h 05 min", "in 3 days";
    total over floats ("in more than 10 years" past that, infinite or NaN)."""
    if not seconds <= 10 * 365 * 86400:  # NaN too
        return "in more than 10 years"
    s = round(max(seconds, 0.0))
    if s < 60:
        return f"in {s} s"
    if s < 3600:
        return f"in {s // 60} min"
    if s < 3 * 86400:
        return f"in {s // 3600} h {s % 3600 // 60:02d} min"
    return f"in {s // 86400} days"


def job_name(job: Allocation | PendingJob) -> str:
    """A job as its user names it: "12", or "4_0" for task 0 of array 4 (its own id
    is the daemon's business, as squeue shows)."""
    if job.array_task_id is not None and job.array_job_id is not None:
        return f"{job.array_job_id}_{job.array_task_id}"
    return str(job.job_id)


def gpu_list(indices: Iterable[int]) -> str:
    """GPU indices as "GPU 3" or "GPUs 0, 1, 2"."""
    shown = sorted(indices)
    names = ", ".join(str(i) for i in shown)
    return f"GPU {names}" if len(shown) == 1 else f"GPUs {names}"


def _by_progress(alloc: Allocation) -> bool:
    """Whether its expected end comes from the progress it reports, not its limit."""
    return alloc.expected_end is not None and alloc.expected_end == alloc.end_time()


def _holder_words(allocs: list[Allocation], now: float) -> str:
    """ "job 12 (alice, ends in 25 min)" for each job holding `allocs`, soonest first."""
    by_job: dict[int, Allocation] = {}
    for a in allocs:
        by_job.setdefault(a.job_id, a)
    ordered = sorted(by_job.values(), key=lambda a: (a.end_time() is None, a.end_time() or 0.0))
    words = []
    for a in ordered[:MAX_NAMED]:
        end = a.end_time()
        when = "no time limit" if end is None else f"ends {within(end - now)}"
        when += ", by its progress" if _by_progress(a) else ""
        words.append(f"job {job_name(a)} ({a.user}, {when})")
    if len(ordered) > MAX_NAMED:
        words.append(f"{len(ordered) - MAX_NAMED} more")
    return ", ".join(words)


class Explainer:
    """Explains the pending jobs of one snapshot: `expected` the forecast's starts by
    job id, `fenced` maps (node, GPU index; None for the whole node) to why it cannot be
    used (fenced by health checks, drained). The queue order is found once, on the first
    job that waits on priority: explaining every pending job costs one sort."""

    def __init__(
        self,
        snap: Snapshot,
        policy: Policy,
        now: float,
        expected: Mapping[int, ExpectedStart] | None = None,
        fenced: Mapping[tuple[str, int | None], str] | None = None,
    ) -> None:
        self.snap, self.policy, self.now = snap, policy, now
        self.expected = expected or {}
        self.fenced = fenced or {}
        self._ahead: dict[int, tuple[int, list[PendingJob]]] | None = None

    def of(self, job: PendingJob, reason: str | None, now: float | None = None) -> list[Blocker]:
        """What keeps `job` (pending in the snapshot) from starting, most telling
        first; [] for a job with no reason yet. `now` (default: the snapshot's) is when
        the sentences are read: "ends in 5 min" counts from it, while the queue order
        stays the snapshot's (an explainer kept for a while reads right)."""
        snap, now = self.snap, self.now if now is None else now
        found: list[Blocker] = []
        if reason == Reason.HELD:
            found.append(Blocker("held", "It is held: `podium release` lets it be scheduled."))
        elif reason == Reason.HELD_ADMIN:
            found.append(Blocker("held", "An administrator holds it: only an administrator's "
                                 "`podium release` lets it be scheduled."))  # fmt: skip
        elif reason == Reason.BEGIN_TIME and job.begin_time is not None:
            text = f"It asked not to start before its begin time, {within(job.begin_time - now)}."
            found.append(Blocker("begin", text, until=job.begin_time))
        elif reason in (Reason.DEPENDENCY, Reason.DEPENDENCY_NEVER):
            found += _dependency_blockers(job, snap)
        elif reason == Reason.ARRAY_LIMIT:
            running = sorted({a.job_id for a in snap.running if a.array_job_id == job.array_job_id})
            text = (
                f"Its array runs at most {job.array_throttle} tasks at once and "
                f"{len(running)} are running."
            )
            found.append(Blocker("array", text, tuple(running)))
        elif reason in (Reason.QOS_GPUS_PER_USER, Reason.QOS_JOBS_PER_USER, Reason.ACCOUNT_GPUS):
            found.append(_limit_blocker(job, reason, snap, self.policy))
        elif reason == Reason.NODE_UNAVAILABLE:
            found.append(_layout_blocker(job, snap))
        elif reason in (Reason.RESOURCES, Reason.PRIORITY):
            if reason == Reason.PRIORITY:
                found += self._ahead_of(job)
            found += _room_blockers(job, snap, now, self.expected.get(job.job_id), self.expected)
        elif reason and reason != Reason.NONE:  # a team quota's own sentence (team_ledger)
            found.append(Blocker("quota", reason[0].upper() + reason[1:] + "."))
        if reason in (Reason.RESOURCES, Reason.PRIORITY, Reason.NODE_UNAVAILABLE):
            found += _fenced_blockers(job, snap, self.fenced)
        return found

    def _ahead_of(self, job: PendingJob) -> list[Blocker]:
        """The jobs of its partition that a pass considers first and that wait for
        room (not held, not waiting for a dependency or a begin time)."""
        if self._ahead is None:
            self._ahead = {}
            order, _ = queue_order(self.snap, self.now, self.policy, with_factors=False)
            seen: dict[str, tuple[int, list[PendingJob]]] = {}
            for other in order:
                count, first = seen.get(other.partition, (0, []))
                self._ahead[other.job_id] = (count, first)
                waits_otherwise = (
                    other.held
                    or other.dependencies
                    or (other.begin_time is not None and other.begin_time > self.now)
                )
                if not waits_otherwise:
                    named = [*first, other] if len(first) < MAX_NAMED else first
                    seen[other.partition] = (count + 1, named)
        count, first = self._ahead.get(job.job_id, (0, []))
        if not count:
            return []
        more = f" and {count - len(first)} more" if count > len(first) else ""
        return [
            Blocker(
                "priority",
                f"{count} job{'s' if count > 1 else ''} of partition {job.partition} come "
                f"before it in priority order: {', '.join(map(job_name, first))}{more}.",
                tuple(j.job_id for j in first),
            )
        ]


def _dependency_blockers(job: PendingJob, snap: Snapshot) -> list[Blocker]:
    out = []
    for dep in job.dependencies:
        if dep.kind == "singleton":
            others = [a.job_id for a in snap.running if a.user == job.user and a.name == job.name]
            text = f"It is a singleton: another job of {job.user} named {job.name!r} runs first."
            out.append(Blocker("dependency", text, tuple(sorted(set(others)))))
            continue
        for dep_id in dep.job_ids:
            status = evaluate(
                (type(dep)(kind=dep.kind, job_ids=(dep_id,)),),
                False,
                snap.job_states,
                snap.array_members,
                False,
            )
            state = snap.job_states.get(dep_id, "gone")
            if status is DepStatus.WAITING:
                need = "start" if dep.kind == "after" else _ENDING[dep.kind]
                text = f"It waits for job {dep_id} ({state}) to {need} ({dep.kind})."
            elif status is DepStatus.NEVER:
                text = (
                    f"Job {dep_id} ended {state}, so {dep.kind}:{dep_id} can never be met: "
                    "cancel this job or resubmit it with another dependency."
                )
            else:
                continue
            out.append(Blocker("dependency", text, (dep_id,)))
    return out


_ENDING = {
    "afterok": "end successfully",
    "afternotok": "fail",
    "afterany": "end",
}


def _limit_blocker(job: PendingJob, reason: str, snap: Snapshot, policy: Policy) -> Blocker:
    """The QoS or account limit, with what is used of it now."""
    mine = [a for a in snap.running if a.user == job.user and a.qos == job.qos]
    limits = policy.qos_limits.get(job.qos)
    asks = job.gpus * job.nodes
    if reason == Reason.QOS_JOBS_PER_USER and limits is not None:
        ids = sorted({a.job_id for a in mine})
        return Blocker(
            "limit",
            f"{job.user} runs {len(ids)} jobs in QoS {job.qos}, whose limit is "
            f"{limits.max_jobs_per_user} per user (MaxJobsPerUser).",
            tuple(ids),
        )
    if reason == Reason.QOS_GPUS_PER_USER and limits is not None:
        used = _gpus_of(mine)
        return Blocker(
            "limit",
            f"{job.user} uses {used} of the {limits.max_gpus_per_user} GPUs per user of QoS "
            f"{job.qos}; this job asks for {asks} more.",
            tuple(sorted({a.job_id for a in mine})),
        )
    cap = policy.account_gpu_limits.get(job.account)
    theirs = [a for a in snap.running if a.account == job.account]
    return Blocker(
        "limit",
        f"Account {job.account} uses {_gpus_of(theirs)} of its {cap} GPUs; this job asks for "
        f"{asks} more.",
        tuple(sorted({a.job_id for a in theirs})),
    )


def _gpus_of(allocs: list[Allocation]) -> int:
    return sum(len(a.gpu_indices) for a in allocs)


def _room_blockers(
    job: PendingJob,
    snap: Snapshot,
    now: float,
    expected: ExpectedStart | None,
    others: Mapping[int, ExpectedStart] | None = None,
) -> list[Blocker]:
    """Who holds what it waits for, and when they end; where they end before its
    expected start, the jobs the forecast starts there first (`others`: every job's
    expected start), since it waits for those too."""
    if expected is not None:
        on_node = [a for a in snap.running if a.node == expected.node]
        wanted = set(expected.gpu_indices)
        holders = [a for a in on_node if wanted & set(a.gpu_indices)] if wanted else []
        if not holders:  # waits for CPUs, memory, or a whole node
            holders = [a for a in on_node if (a.end_time() or float("inf")) <= expected.start]
        where = f"{expected.node}" + (f" ({gpu_list(wanted)})" if wanted else "")
        text = f"It is expected to start {within(expected.start - now)} on {where}"
        text += f", when these end: {_holder_words(holders, now)}" if holders else ""
        ids = tuple(sorted({a.job_id for a in holders}))
        last = max((a.end_time() or expected.start for a in holders), default=now)
        first = (
            _started_there_first(job, snap, expected, others or {}) if last < expected.start else []
        )
        if first:
            names = ", ".join(
                f"job {job_name(p)} ({p.user}, expected to start {within(s.start - now)})"
                for p, s in first[:MAX_NAMED]
            )
            text += f"{',' if holders else ''} after what the forecast runs there first: {names}"
            ids = tuple(sorted({*ids, *(p.job_id for p, _ in first[:MAX_NAMED])}))
        return [Blocker("gpus", text + ".", ids, expected.start)]
    nodes = _partition_nodes(job, snap)
    holders = [a for a in snap.running if a.node in nodes]
    endless = [a for a in holders if a.end_time() is None]
    if endless:
        text = (
            "No start can be forecast: what it needs is held by jobs with no time limit: "
            f"{_holder_words(endless, now)}."
        )
        return [Blocker("gpus", text, tuple(sorted({a.job_id for a in endless})))]
    text = "No start can be forecast within the forecast's horizon"
    if holders:
        text += f"; what it needs is held by {_holder_words(holders, now)}"
    return [Blocker("forecast", text + ".", tuple(sorted({a.job_id for a in holders})))]


def _started_there_first(
    job: PendingJob,
    snap: Snapshot,
    expected: ExpectedStart,
    others: Mapping[int, ExpectedStart],
) -> list[tuple[PendingJob, ExpectedStart]]:
    """Pending jobs the forecast starts before `job` on its node and GPUs (the whole
    node when it waits for no GPU), soonest first."""
    wanted = set(expected.gpu_indices)
    found = []
    for other in snap.pending:
        seen = others.get(other.job_id)
        if other.job_id == job.job_id or seen is None or seen.node != expected.node:
            continue
        if seen.start < expected.start and (not wanted or wanted & set(seen.gpu_indices)):
            found.append((other, seen))
    return sorted(found, key=lambda pair: (pair[1].start, pair[0].job_id))


def _partition_nodes(job: PendingJob, snap: Snapshot) -> set[str]:
    allowed = snap.partition_nodes.get(job.partition)
    return {n.name for n in snap.nodes if allowed is None or n.name in allowed}


def _layout_blocker(job: PendingJob, snap: Snapshot) -> Blocker:
    """Which part of what it asks of each node no node of its partition can hold."""
    nodes = [n for n in snap.nodes if n.name in _partition_nodes(job, snap)]
    up = [n for n in nodes if n.schedulable]
    kind = f" {job.gpu_type}" if job.gpu_type else ""
    where = "on one node" if job.nodes == 1 else f"on each of {job.nodes} nodes"
    asks = (
        f"It asks for {_count(job.gpus, kind.strip() + ' GPU')}, {_count(job.cpus, 'CPU')} and "
        f"{job.mem_mb} MB {where}"
    )
    fits = [n.name for n in up if could_ever_fit(job, n)]
    if not up:
        return Blocker("layout", f"{asks}, but no node of partition {job.partition} is up.")
    if fits:
        return Blocker(
            "layout",
            f"{asks}, but only {len(fits)} node{'s' if len(fits) > 1 else ''} of partition "
            f"{job.partition} can hold that while up ({', '.join(fits[:MAX_NAMED])}).",
        )
    most = max(up, key=lambda n: _usable(job, n))
    short = []
    if _usable(job, most) < job.gpus:
        short.append(f"{_usable(job, most)}{kind} GPUs (on {most.name})")
    if job.cpus > max(n.cpus for n in up):
        short.append(f"{max(n.cpus for n in up)} CPUs")
    if job.mem_mb > max(n.memory_mb for n in up):
        short.append(f"{max(n.memory_mb for n in up)} MB")
    said = " and ".join(short) or "a node that holds all of it at once"
    return Blocker(
        "layout",
        f"{asks}; the most a node of partition {job.partition} has usable is {said}.",
    )


def _count(n: int, what: str) -> str:
    what = what.strip()
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _usable(job: PendingJob, node: NodeView) -> int:
    if job.gpu_type is None:
        return sum(1 for g in node.gpus if g.whole)
    return sum(1 for g in node.gpus if g.type == job.gpu_type)


def _fenced_blockers(
    job: PendingJob, snap: Snapshot, fenced: Mapping[tuple[str, int | None], str]
) -> list[Blocker]:
    if not job.gpus and not any(gpu is None for _, gpu in fenced):
        return []
    nodes = _partition_nodes(job, snap)
    out = []
    for (node, gpu), why in sorted(fenced.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
        if node not in nodes:
            continue
        what = f"Node {node} is out of service" if gpu is None else f"GPU {gpu} of {node} is fenced"
        out.append(Blocker("fenced", f"{what}: {why}."))
    return out


__all__ = ["Blocker", "ExpectedStart", "Explainer", "gpu_list", "job_name", "within"]
