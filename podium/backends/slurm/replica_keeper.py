"""Replace, don't restart, on Slurm: a job submitted with `--spares=S` holds S spare
nodes beside its N replica nodes (`--no-kill`, so a lost node ends its replica's step
and not the job), and this keeper, run as the batch step in place of the job's
script, starts the script once per replica node as a step of its own
(`srun -N1 -n1 --nodelist=NODE`). Standard library only: it runs on the batch node
with the job's user's identity.

When one replica is lost (its step ends with a failure, its host falls silent while
the other ranks say they lost a peer, or the health hook fences its node), the keeper
gives its rank to a spare node through the contract of the embedded cluster
(`podium.run.replace`, docs/resiliency.md): the next generation in
PODIUM_REPLACE_FILE, SIGURG to the survivors' steps, and the rank started on the spare
node, or taken by the warm standby already running there. The survivors' steps keep
running. Slurm's own view stays true: the lost node is set DOWN ("Not responding") by
slurmctld itself, or drained by the hook with a `podium:` reason, and `--no-kill`
removes it from the job.

The job's directory (the notice, the ranks' files, the record of replacements, the
script for the other nodes) is STATE/user-USER/slurm-jobs/JOBID.RESTART: the state
directory must be shared by the nodes, as it is for checkpoints. With no spare left,
a job that never wrote `ready`, or the batch node itself lost, the job ends as without
spares (and auto-resume applies).

Stacks with membership of their own take part without a word, and a replacement gets
no notice and no SIGURG (PODIUM_STACK; their servers: `keeper_stacks`):
- torchft (--torchft): each replica node is a replica group (podium.run.torchft); the
  keeper runs the job's lighthouse on the batch node and gives each step
  REPLICA_GROUP_ID, NUM_REPLICA_GROUPS, TORCHFT_LIGHTHOUSE and its own node as
  MASTER_ADDR (the group's store); a lost group started again on a spare node joins
  the next quorum and a peer heals it.
- TorchElastic (a script that runs `torchrun`): each replica node is a TorchElastic
  node (podium.run.torchelastic); the keeper hosts the c10d rendezvous store at
  MASTER_ADDR:MASTER_PORT on the batch node, one port for the whole job, and a new
  agent on a spare node joins that rendezvous in TorchElastic's next round.
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

from podium.api.hostlist import hostlist
from podium.backends.slurm.keeper_parts import (
    address,
    copy_script,
    generation_port,
    job_steps,
    make_job_dir,
    refuse,
)
from podium.backends.slurm.keeper_stacks import STACKS, batch_host, start_lighthouse, start_store
from podium.run.files import read_json_safely
from podium.run.rank_beats import lost_ranks, make_ranks_dir, read_beats
from podium.run.replace import WAKE_SIGNAL, Spares
from podium.run.torchelastic import torchelastic_environment
from podium.run.torchft import torchft_environment

LOOK_S = 0.1  # how often the keeper looks at its steps and the ranks' files
LOST_GRACE_S = 1.0  # a rank silent this long after the others lost a peer is lost
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)


@dataclass
class Step:
    """One srun of the keeper's: a replica's rank, or a spare's standby (rank None)."""

    node: str
    proc: subprocess.Popen[bytes]
    rank: int | None = None
    spare: int | None = None


@dataclass
class Keeper:
    """The job's replicas, its spare nodes and its replacements."""

    job_id: str
    job_dir: Path
    script: Path
    args: list[str]
    replica_nodes: list[str]
    spare_nodes: list[str]
    base_port: int
    steps: list[Step] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)  # rank -> exit code, once ended
    abandoned: list[subprocess.Popen[bytes]] = field(default_factory=list)
    lost_nodes: set[str] = field(default_factory=set)  # nodes whose replica was replaced
    spares: Spares | None = None
    stopping: int | None = None
    stack: str = ""  # "torchelastic" or "torchft" (keeper_stacks), "" (Podium's contract)
    server: subprocess.Popen[bytes] | None = None  # the stack's lighthouse or store
    lighthouse_url: str = ""

    @property
    def world(self) -> int:
        return len(self.replica_nodes)

    def prepare(self) -> None:
        """In the job's directory (made and checked by `make_job_dir`): the notice
        (empty), the ranks' directory, the record."""
        self.spares = Spares(self.job_dir, [], self.stack)
        self.spares.create(None)
        make_ranks_dir(self.job_dir / "ranks", None)

    def env(self, rank: int | None, node: str, **more: str) -> dict[str, str]:
        """A step's environment: the job's, with its place in the world."""
        env = dict(os.environ)
        env.update(
            WORLD_SIZE=str(self.world), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
            MASTER_ADDR=address(self.master_node()), MASTER_PORT=str(self.port()),
            PODIUM_REPLACE_FILE=str(self.job_dir / "replace"),
            PODIUM_RANK_BEATS=str(self.job_dir / "ranks"), PODIUM_NODE=node,
        )  # fmt: skip
        if rank is not None:
            env["RANK"] = str(rank)
        else:
            env.pop("RANK", None)
        if self.stack == "torchft" and rank is not None:  # its own store, on its own node
            env.update(MASTER_ADDR=address(node), MASTER_PORT=str(self.base_port))
            torchft_environment(env, rank, self.world, self.lighthouse_url)
        if self.stack == "torchelastic":
            torchelastic_environment(env)
        env.update(more)
        return env

    def master_node(self) -> str:
        return self.replica_nodes[0]

    def fall_back(self, lost: Step, why: str) -> int:
        """No spare can take `lost`'s place (none left, or the job never wrote
        `ready`): the job ends as it would without spares. A lost node (not a process
        that failed) requeues it, as Slurm's NODE_FAIL would, when it asked for
        auto-resume; the job wrapper's restart limits apply at the next start."""
        print(f"podium: {why}; no spare node takes its place", file=sys.stderr)
        code = self.codes.get(lost.rank if lost.rank is not None else -1) or 1
        node_lost = lost.proc.poll() is None or self.fault_on(lost.node) is not None
        if node_lost and int(os.environ.get("PODIUM_AUTO_RESUME") or 0) > 0:
            subprocess.run(
                ["scontrol", "requeue", "--", self.job_id], capture_output=True, timeout=30
            )
        return self.stop_all(code)

    def port(self, ahead: int = 0) -> int:
        """The rendezvous port of the current generation (`ahead`: of a later one)."""
        if self.stack == "torchelastic":  # one rendezvous, which new nodes join
            return generation_port(self.base_port, 0)
        generation = (self.spares.generation if self.spares else 0) + ahead
        return generation_port(self.base_port, generation)

    def srun(self, node: str, env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
        command = [
            "srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--kill-on-bad-exit=0",
            f"--job-name={name}", str(self.script), *self.args,
        ]  # fmt: skip
        return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)

    def start(self) -> None:
        if self.stack == "torchft":
            self.server, self.lighthouse_url = start_lighthouse(batch_host())
        elif self.stack == "torchelastic":  # at MASTER_ADDR:MASTER_PORT, on the batch node
            self.server = start_store(address(self.master_node()), self.port())
        for rank, node in enumerate(self.replica_nodes):
            proc = self.srun(node, self.env(rank, node), f"rank{rank}")
            self.steps.append(Step(node, proc, rank=rank))

    def start_standbys(self) -> None:
        """A warm standby on each spare node, once the job asked for them."""
        assert self.spares is not None
        if (
            not any(self.spare_nodes)
            or not self.spares.takes_part()
            or not self.spares.standby_asked
        ):
            return
        for index, node in enumerate(self.spare_nodes):
            if not node or index in self.spares.standby:  # taken, or its standby started
                continue
            self.spares.standby[index] = 1  # asked for once: not again if it ends
            env = self.env(None, node, PODIUM_STANDBY=str(index), MASTER_PORT="")
            self.steps.append(Step(node, self.srun(node, env, f"spare{index}"), spare=index))

    def run(self) -> int:
        """Keep the replicas until they all end; the job's exit code."""
        self.start()
        while True:
            if self.stopping is not None:
                return self.stop_all(self.stopping)
            self.start_standbys()
            lost = self.look()
            if lost is not None and not self.replace(*lost):
                return self.fall_back(*lost)
            replicas = [s for s in self.steps if s.rank is not None]
            if not replicas:
                return self.finish()
            time.sleep(LOOK_S)

    def look(self) -> tuple[Step, str] | None:
        """A replica lost since the last look, and why; ended steps are settled."""
        for step in list(self.steps):
            code = step.proc.poll()
            if code is None:
                continue
            self.steps.remove(step)
            if step.rank is None:
                continue  # a standby ended: its spare starts cold if needed
            self.codes[step.rank] = code
            if code != 0 and any(s.rank is not None for s in self.steps):
                why = self.fault_on(step.node) or f"rank {step.rank} on {step.node} ended ({code})"
                return step, why
        assert self.spares is not None
        found = lost_ranks(
            read_beats(self.job_dir / "ranks", self.world), time.time(), LOST_GRACE_S
        )
        if found is None:
            return None
        lost = [s for s in self.steps if s.rank in found[0]]
        if len(lost) > 1:  # one generation replaces one rank: the job ends as without spares
            self.spare_nodes = []
        return (lost[0], f"{found[1]} ({', '.join(s.node for s in lost)})") if lost else None

    def fault_on(self, node: str) -> str | None:
        """The health hook's reason for fencing `node` while this job ran there."""
        order = read_json_safely(self.job_dir / f"fault-{node}.json", 4096)
        if not isinstance(order, dict) or not order.get("reason"):
            return None
        return str(order["reason"])

    def replace(self, lost: Step, why: str) -> bool:
        """Give `lost`'s rank to the next spare node; False when none can take it."""
        assert self.spares is not None and lost.rank is not None
        if not any(self.spare_nodes) or not self.spares.takes_part():
            return False
        self.codes.pop(lost.rank, None)
        if lost in self.steps:
            self.steps.remove(lost)
            self.abandoned.append(lost.proc)  # its host may never answer: reaped at the end
        self.lost_nodes.add(lost.node)
        with contextlib.suppress(OSError):
            os.unlink(self.job_dir / "ranks" / str(lost.rank))
        index = next(i for i, n in enumerate(self.spare_nodes) if n)
        node = self.spare_nodes[index]
        self.spare_nodes[index] = ""  # taken
        self.replica_nodes[lost.rank] = node
        standby = next((s for s in self.steps if s.spare == index), None)
        self.spares.announce(
            {
                "master_addr": address(self.master_node()), "master_port": self.port(ahead=1),
                "world": self.world, "replaced": [lost.rank],
                "survivors": sorted(s.rank for s in self.steps if s.rank is not None),
                "reason": why, "node_from": lost.node, "node_to": node, "spare": index,
                "warm": standby is not None,
            }
        )  # fmt: skip
        if not self.spares.self_joining:  # else the stack's rendezvous or lighthouse tells
            self.signal_steps(WAKE_SIGNAL, [s for s in self.steps if s.rank is not None])
        if standby is not None:
            standby.rank, standby.spare = lost.rank, None
        else:
            extra = {"PODIUM_REPLACEMENT": "1",
                     "PODIUM_REPLACE_GENERATION": str(self.spares.generation)}  # fmt: skip
            env = self.env(lost.rank, node, **extra)
            self.steps.append(Step(node, self.srun(node, env, f"rank{lost.rank}"), lost.rank))
        print(f"podium: {why}: rank {lost.rank} goes on on spare node {node}", file=sys.stderr)
        return True

    def signal_steps(self, sig: int, steps: list[Step]) -> None:
        """Send `sig` to the tasks of these steps (scancel, by the nodes they run on)."""
        nodes = {s.node for s in steps} - self.lost_nodes
        for step_id, node in job_steps(self.job_id):
            if node in nodes:
                subprocess.Popen(
                    ["scancel", f"--signal={sig}", f"{self.job_id}.{step_id}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip

    def finish(self) -> int:
        """Every replica ended: stop the standbys, reap what is left; the job's code."""
        code = max(self.codes.values(), default=0)
        self.stop_all(code)
        return code

    def stop_all(self, code: int) -> int:
        """End every step still running (its tasks SIGKILLed) and return `code`."""
        cancels = [
            subprocess.Popen(
                ["scancel", "--signal=KILL", f"{self.job_id}.{step_id}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for step_id, node in job_steps(self.job_id)
            if node not in self.lost_nodes  # its host may never answer
        ]
        procs = [s.proc for s in self.steps] + self.abandoned + cancels
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            procs.append(self.server)
        deadline = time.monotonic() + 5
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            if proc.poll() is None:
                proc.kill()  # an srun whose host is gone: its step ends with the job
                proc.wait()
        return code

    def forward(self, signum: int, _frame: object) -> None:
        """A signal for the job: to every step's tasks; SIGTERM ends the job."""
        with contextlib.suppress(Exception):
            self.signal_steps(signum, self.steps)
        if signum in (signal.SIGTERM, signal.SIGINT):
            self.stopping = 128 + signum


def main(argv: list[str]) -> int:
    """Run the script (descriptor 9, as the batch launcher left it) on every replica
    node, keep the spares; `argv`: the script's arguments."""
    environ = dict(os.environ)
    nodes = hostlist(environ.get("SLURM_JOB_NODELIST", ""))
    spares = int(environ.get("PODIUM_SPARE_NODES") or 0)
    if not 0 < spares < len(nodes):
        print(
            f"podium: the replica keeper needs spare nodes beside the replicas' "
            f"({spares} spare of {len(nodes)} nodes)", file=sys.stderr,
        )  # fmt: skip
        return 1
    try:
        home = make_job_dir(environ)
    except OSError as exc:
        return refuse(exc)
    keeper = Keeper(
        job_id=environ.get("SLURM_JOB_ID", ""), job_dir=home, script=home / "script",
        args=argv, replica_nodes=nodes[: len(nodes) - spares],
        spare_nodes=nodes[len(nodes) - spares :],
        base_port=int(environ.get("MASTER_PORT") or 29500),
        stack=stack if (stack := environ.get("PODIUM_STACK", "")) in STACKS else "",
    )  # fmt: skip
    keeper.prepare()
    copy_script(keeper.script)
    for sig in FORWARDED:
        signal.signal(sig, keeper.forward)
    return keeper.run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
