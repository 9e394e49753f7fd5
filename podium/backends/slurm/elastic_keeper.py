"""Elastic training across nodes on Slurm: a job submitted with `--elastic=MIN:MAX`
runs one replica per node, each node a Slurm job of its own: the first (the job
Podium names) runs rank 0 and this keeper, as its batch step in place of the script;
the others are its members (`--comment=podium-elastic-member:JOB`, same name, QoS and
account), whose batch steps only hold their node. Slurm cannot grow an allocation, so
the job grows by starting members and shrinks by cancelling them. The keeper runs
the script once per replica as a step of the replica's job (`srun --jobid`), with the
rendezvous of one generation (MASTER_ADDR: rank 0's node). Standard library only: it
runs on the job's first node as the job's user.

- **Start at the free size.** Members for the idle nodes (up to MAX) are submitted
  and those that start within MEMBER_START_S are kept: the job starts at the largest
  of its sizes they make (waiting for MIN when fewer are free).
- **Shrink for a QoS that may preempt it.** A pending job of a QoS that the cluster
  config lets preempt the job's (PODIUM_SHRINK_FOR), waiting for N nodes of which
  only F are idle, takes N - F replicas above MIN, as on the embedded cluster (never
  below MIN; nothing when that is not enough).
- **Grow into idle nodes** once the job has run PODIUM_GROW_DELAY seconds at its size
  and no other job of the partition waits for room.
- **A resize is the contract of docs/elastic.md**: the notice (PODIUM_RESIZE_FILE)
  gets {"replicas", "deadline", "resize_count"}, every rank gets the resize signal
  (sent again each SIGNAL_AGAIN_S to a rank's job whose step it did not reach: a step
  srun has just launched is not listed yet), the resize is in the record from then
  on, and the keeper waits for every rank to exit (or `ack`) until the grace ends; then
  what runs is cancelled, the members given up are cancelled, and every rank starts
  again at the new size with PODIUM_RESIZE_COUNT one higher.
- **Leave a slow host.** The ranks time their links (PODIUM_LINK_BEATS,
  `podium.recover.slow_links`); a host they name is confirmed with the two-host
  yardstick while the ranks are stopped, drained with both figures, and its member
  given up (`elastic_links`). A host cleared by the yardstick keeps its place.

The record (`elastic.json`: replicas, members, resize_log) sits in the job's
directory, STATE/user-USER/slurm-jobs/JOBID.RESTART, where `podium show` reads it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from podium.api.elastic_sizes import elastic_sizes, largest_fitting
from podium.backends.slurm import elastic_slurm as slurm
from podium.backends.slurm.elastic_links import MIN_FRACTION, drain, step_env, yardstick
from podium.backends.slurm.keeper_parts import (
    address,
    copy_script,
    generation_port,
    make_job_dir,
    refuse,
)
from podium.recover.slow_links import LinkWatch, SlowHost
from podium.run.files import write_atomic
from podium.run.rank_beats import make_ranks_dir, read_step_seconds
from podium.run.resize_notice import acknowledged, own_file, write_notice

LOOK_S = 0.5  # how often the keeper looks at its ranks and the partition
MEMBER_START_S = 15.0  # how long a new member may wait for its node before it is given up
SIGNAL_AGAIN_S = 1.0  # a resize's signal that reached no step of a rank's job is sent again
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2, signal.SIGHUP)


def shrink_to(
    size: int, allowed: list[int], waiting: list[slurm.Waiting], idle: int, shrink_for: set[str]
) -> tuple[int, str] | None:
    """The size to shrink to, and why, for the first waiting job of a QoS that may
    preempt this one's that more nodes would let start; None when none needs it."""
    for job in waiting:
        if job.member_of or job.qos not in shrink_for or not job.wants_room():
            continue
        if job.nodes <= idle:
            continue  # it starts without us
        to = largest_fitting(allowed, size - (job.nodes - idle))
        if to is not None and to < size:
            return to, f"shrink {size}->{to} for job {job.job_id}"
    return None


@dataclass
class Rank:
    """One replica's step: its rank, the Slurm job it runs in, its node, its srun."""

    rank: int
    job_id: str
    node: str
    proc: subprocess.Popen[bytes]


@dataclass
class ElasticKeeper:
    job_id: str
    node: str  # the first node's: rank 0's
    partition: str
    job_dir: Path
    script: Path
    args: list[str]
    allowed: list[int]  # its sizes, smallest first
    grace_s: float
    resize_signal: int
    shrink_for: set[str]
    grow_delay_s: float
    member_directives: str
    base_port: int
    members: list[tuple[str, str]] = field(default_factory=list)  # (job id, node)
    ranks: list[Rank] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)
    resize_count: int = 0
    sized_at: float = 0.0  # when the job last started at its size (monotonic)
    log: list[dict[str, Any]] = field(default_factory=list)
    stopping: int | None = None
    links: LinkWatch = field(default_factory=LinkWatch)
    link_step: float = 0.0  # the last link check looked at
    stuck: set[int] = field(default_factory=set)  # slow ranks the keeper cannot leave

    @property
    def size(self) -> int:
        return 1 + len(self.members)

    @property
    def notice(self) -> Path:
        return self.job_dir / "resize"

    def record(self) -> None:
        """elastic.json: what `podium show` gives of the job's replicas and resizes."""
        write_atomic(self.job_dir / "elastic.json", {
            "replicas": self.size, "replicas_min": self.allowed[0],
            "replicas_max": self.allowed[-1], "resizes": self.resize_count,
            "members": [m for m, _ in self.members],
            "nodes": [self.node, *(n for _, n in self.members)], "resize_log": self.log,
        }, durable=False)  # fmt: skip

    def add_members(self, wanted: int, *, wait_for: int = 0) -> None:
        """Submit `wanted` members; keep those that start within MEMBER_START_S (or,
        with `wait_for`, until that many have started), cancel the others."""
        asked = [i for _ in range(wanted)
                 if (i := slurm.submit_member(self.job_id, self.member_directives,
                                              self.partition))]  # fmt: skip
        deadline = time.monotonic() + MEMBER_START_S
        started: dict[str, str] = {}
        while asked and self.stopping is None:
            states = slurm.job_states(asked)
            started = {j: n for j, (s, n) in states.items() if s == "RUNNING" and n}
            if len(started) == len(asked):
                break
            if time.monotonic() > deadline and len(started) >= wait_for:
                break
            time.sleep(LOOK_S)
        slurm.cancel([j for j in asked if j not in started])
        self.members += sorted(started.items(), key=lambda m: int(m[0]))
        most = largest_fitting(self.allowed, self.size) or self.size
        self.let_go(most)

    def let_go(self, size: int) -> None:
        """Cancel the members beyond `size` replicas (the highest ranks first)."""
        extra = self.members[size - 1 :]
        self.members = self.members[: size - 1]
        slurm.cancel([m for m, _ in extra])

    def env(self, rank: int) -> dict[str, str]:
        """A rank's environment: the job's, less Slurm's own (the step's job is named
        by --jobid), with its place in this generation's world."""
        env = step_env()
        port = generation_port(self.base_port, self.resize_count)
        env.update(
            WORLD_SIZE=str(self.size), RANK=str(rank), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
            MASTER_ADDR=address(self.node), MASTER_PORT=str(port),
            PODIUM_REPLICAS=str(self.size), PODIUM_RESIZE_COUNT=str(self.resize_count),
            PODIUM_RESIZE_FILE=str(self.notice), PODIUM_LINK_BEATS=str(self.job_dir / "links"),
        )  # fmt: skip
        return env

    def start_ranks(self) -> None:
        own_file(str(self.notice), None)  # empty again: no resize is coming
        make_ranks_dir(self.job_dir / "links", None)  # the last world's checks are gone
        self.links.forget()
        self.link_step = 0.0
        places = [(self.job_id, self.node), *self.members]
        for rank, (job, node) in enumerate(places):
            command = ["srun", f"--jobid={job}", "--nodes=1", "--ntasks=1",
                       "--kill-on-bad-exit=0", f"--job-name=rank{rank}",
                       str(self.script), *self.args]  # fmt: skip
            proc = subprocess.Popen(command, env=self.env(rank), stdin=subprocess.DEVNULL)
            self.ranks.append(Rank(rank, job, node, proc))
        self.sized_at = time.monotonic()
        self.record()

    def settle(self) -> None:
        for r in list(self.ranks):
            code = r.proc.poll()
            if code is not None:
                self.ranks.remove(r)
                self.codes[r.rank] = code

    def run(self) -> int:
        """Keep the replicas until they end; the job's exit code."""
        free = slurm.idle_nodes(self.partition)
        want = min(self.allowed[-1], 1 + free)
        self.add_members(max(want, self.allowed[0]) - 1, wait_for=self.allowed[0] - 1)
        if self.stopping is not None:
            return self.stop(self.stopping)
        self.start_ranks()
        while True:
            if self.stopping is not None:
                return self.stop(self.stopping)
            self.settle()
            failed = [c for c in self.codes.values() if c != 0]
            if failed or not self.ranks:
                return self.stop(max(failed, default=0))
            change = self.change()
            if change is not None:
                self.resize(*change)
            slow = self.slow_host()
            if slow is not None:
                self.leave(slow)
            time.sleep(LOOK_S)

    def change(self) -> tuple[int, str] | None:
        """A resize due now: a shrink for a waiting job, else a grow into idle nodes."""
        waiting = slurm.waiting_jobs(self.partition)
        idle = slurm.idle_nodes(self.partition)
        shrink = shrink_to(self.size, self.allowed, waiting, idle, self.shrink_for)
        if shrink is not None:
            return shrink
        if time.monotonic() - self.sized_at < self.grow_delay_s or self.size >= self.allowed[-1]:
            return None
        if any(w.wants_room() and w.member_of != self.job_id for w in waiting) or not idle:
            return None
        grow = largest_fitting(self.allowed, self.size + idle)
        if grow is None or grow <= self.size:
            return None
        before = self.size
        self.add_members(grow - before)
        if self.size <= before:
            return None
        return self.size, f"grow {before}->{self.size} into free nodes"

    def resize(self, to: int, cause: str) -> None:
        """The contract: notice and signal, wait for the ranks (or the grace), stop what
        is left, give up members beyond `to`, start again at the new size."""
        before = self.size if to < self.size else self.size_before_grow(to)
        entry = self.pause(before, to, cause)
        if self.stopping is not None:
            return
        self.let_go(to)
        self.restart(entry)

    def pause(self, before: int, to: int, cause: str) -> dict[str, Any]:
        """Tell the ranks (notice, signal), wait for them until the grace ends, stop
        what is left; the resize's log entry."""
        entry: dict[str, Any] = {"from": before, "to": to, "cause": cause, "time": time.time()}
        self.log.append(entry)
        self.record()  # `podium show` has the resize from now on, without its "done"
        print(f"podium: elastic job {self.job_id}: {cause}", file=sys.stderr, flush=True)
        deadline = time.time() + self.grace_s
        write_notice(str(self.notice), to, deadline, self.resize_count + 1)
        missed = slurm.signal_steps(sorted({r.job_id for r in self.ranks}), self.resize_signal)
        again = time.monotonic() + SIGNAL_AGAIN_S
        while self.ranks and time.time() < deadline and self.stopping is None:
            if acknowledged(str(self.notice)):
                break
            time.sleep(0.2)
            self.settle()
            if missed and time.monotonic() >= again:  # a step not listed yet, a tool failed
                running = {r.job_id for r in self.ranks}
                missed = slurm.signal_steps([j for j in missed if j in running],
                                            self.resize_signal)  # fmt: skip
                again = time.monotonic() + SIGNAL_AGAIN_S
        self.stop_ranks()
        return entry

    def restart(self, entry: dict[str, Any]) -> None:
        self.codes.clear()
        self.resize_count += 1
        entry["done"] = time.time()
        self.start_ranks()

    def slow_host(self) -> SlowHost | None:
        """A rank the link checks name, once every rank said at a new step."""
        said = read_step_seconds(self.job_dir / "links", self.size)
        steps = {step for step, _ in said.values()}
        if len(said) != self.size or len(steps) != 1 or steps.pop() <= self.link_step:
            return None
        self.link_step = next(iter(said.values()))[0]
        found = self.links.look(self.link_step, {r: s for r, (_, s) in said.items()})
        if found is None or found.rank in self.stuck:
            return None
        if found.rank == 0 or self.size <= self.allowed[0] or self.size < 3:
            self.stuck.add(found.rank)  # its own node, or no replica to spare: said once
            print(f"podium: elastic job {self.job_id}: {found.words()}; the job cannot "
                  "leave that host", file=sys.stderr, flush=True)  # fmt: skip
            return None
        return found

    def leave(self, slow: SlowHost) -> None:
        """Confirm the slow rank's host beside a good one while the ranks are stopped;
        drain it and go on without it, or go on as before when it is cleared."""
        places = [(self.job_id, self.node), *self.members]
        suspect, good = places[slow.rank], [p for i, p in enumerate(places) if i != slow.rank]
        to = largest_fitting(self.allowed, self.size - 1) or self.size
        entry = self.pause(self.size, to, f"leave {suspect[1]}? {slow.words()}")
        if self.stopping is not None:
            return
        port = generation_port(self.base_port + 509, self.resize_count)  # between two worlds
        measured = yardstick([good[0], suspect], port, step_env())
        expected = yardstick([good[0], good[1]], port + 1, step_env())
        beside = f"{measured} GB/s" if measured is not None else "failed"
        figures = (f"all_reduce busbw {beside} beside {good[0][1]}, {expected} GB/s "
                   f"between {good[0][1]} and {good[1][1]}")  # fmt: skip
        entry["yardstick"] = {"suspect": measured, "good": expected}
        if expected and (measured is None or measured < MIN_FRACTION * expected):
            reason = f"nccl-health: slow links in job {self.job_id}: {slow.words()}; {figures}"
            refused = drain(suspect[1], reason)
            entry["cause"] = f"leave {suspect[1]}: slow links ({figures})"
            entry["drained"] = None if refused else suspect[1]
            if refused:
                print(f"podium: cannot drain {suspect[1]}: {refused}", file=sys.stderr)
            self.members.remove(suspect)
            slurm.cancel([suspect[0]])
            self.let_go(to)
        else:
            entry["cause"] = f"kept {suspect[1]}: the yardstick cleared it ({figures})"
            entry["to"] = self.size
        self.restart(entry)

    def size_before_grow(self, to: int) -> int:
        """The size the ranks run at now (the members just added are not in it)."""
        return len({r.rank for r in self.ranks}) or to

    def stop_ranks(self) -> None:
        """Cancel the ranks' steps still running (SIGTERM, then SIGKILL) and reap them."""
        if not self.ranks:
            return
        jobs = sorted({r.job_id for r in self.ranks})
        slurm.signal_steps(jobs, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while self.ranks and time.monotonic() < deadline:
            time.sleep(0.1)
            self.settle()
        if self.ranks:
            slurm.signal_steps(jobs, signal.SIGKILL)
        for r in self.ranks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                r.proc.wait(5)
            if r.proc.poll() is None:
                r.proc.kill()
                r.proc.wait()
        self.ranks.clear()

    def stop(self, code: int) -> int:
        """End the ranks and the members; `code`."""
        self.stop_ranks()
        self.let_go(1)
        self.record()
        return code

    def forward(self, signum: int, _frame: object) -> None:
        """A signal for the job: to every rank; SIGTERM and SIGINT end it."""
        with contextlib.suppress(Exception):
            slurm.signal_steps(sorted({r.job_id for r in self.ranks}), signum)
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = 128 + signum


def main(argv: list[str]) -> int:
    """Run the script (descriptor 9, as the batch launcher left it) on every replica
    node; `argv`: the script's arguments."""
    environ = dict(os.environ)
    low, high, step = (int(x) for x in environ["PODIUM_ELASTIC"].split(":"))
    try:
        home = make_job_dir(environ)
    except OSError as exc:
        return refuse(exc)
    keeper = ElasticKeeper(
        job_id=environ.get("SLURM_JOB_ID", ""), node=environ.get("SLURMD_NODENAME", ""),
        partition=environ.get("SLURM_JOB_PARTITION", ""), job_dir=home,
        script=home / "script", args=argv, allowed=sorted(elastic_sizes(low, high, step)),
        grace_s=float(environ.get("PODIUM_RESIZE_GRACE") or 60),
        resize_signal=int(environ.get("PODIUM_RESIZE_SIGNAL") or signal.SIGUSR1),
        shrink_for={q for q in (environ.get("PODIUM_SHRINK_FOR") or "").split(",") if q},
        grow_delay_s=float(environ.get("PODIUM_GROW_DELAY") or 60),
        member_directives=environ.get("PODIUM_MEMBER_SBATCH", ""),
        base_port=int(environ.get("MASTER_PORT") or 29500),
    )  # fmt: skip
    copy_script(keeper.script)
    for sig in FORWARDED:
        signal.signal(sig, keeper.forward)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # the resize signal is for the ranks
    return keeper.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
