"""What the elastic keeper asks of Slurm, as the job's user, with its CLI tools:
the partition's idle nodes and waiting jobs, its members' states, a member's
submission, cancels and signals to steps. Standard library only; every call is an argv
list, bounded in time, and a tool that fails reads as "nothing" (the keeper looks
again a moment later).

A member's batch step holds its node for the job: it waits while the job (the
keeper's) runs, so a member never outlives a keeper that died with its node."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from podium.backends.slurm.keeper_parts import job_steps

MEMBER_TAG = "podium-elastic-member:"  # a member's --comment: the tag, then its job's id
MEMBER_BODY = """
while [ "$(squeue -h -j "$PODIUM_ELASTIC_LEADER" -o %T 2>/dev/null)" = RUNNING ]; do
    sleep 2
done
"""
WAITING_FOR_ROOM = ("Resources", "Priority", "ReqNodeNotAvail", "Nodes_required")


@dataclass(frozen=True)
class Waiting:
    """A pending job of the partition: its id, QoS, node count and reason."""

    job_id: str
    qos: str
    nodes: int
    reason: str
    member_of: str  # the elastic job it is a member of ("" for any other job)

    def wants_room(self) -> bool:
        """Whether it waits only for nodes (not held, not for a dependency or a time)."""
        return self.reason in WAITING_FOR_ROOM


def _call(
    argv: list[str], stdin: str | None = None, timeout: float = 15
) -> subprocess.CompletedProcess[str] | None:
    """The tool's run, or None when it could not start or ran past `timeout`."""
    try:
        return subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=timeout
        )  # the job's environment: SLURM_CONF names the cluster
    except (OSError, subprocess.TimeoutExpired):
        return None


def _run(argv: list[str], stdin: str | None = None) -> str:
    """The tool's output, or "" when it failed."""
    done = _call(argv, stdin)
    return done.stdout if done is not None and done.returncode == 0 else ""


def _ok(argv: list[str]) -> bool:
    """Whether the tool ran and exited 0."""
    done = _call(argv)
    return done is not None and done.returncode == 0


def idle_nodes(partition: str) -> int:
    """How many of the partition's nodes are idle (in service, nothing on them)."""
    out = _run(["sinfo", "-h", "-N", "-t", "idle", "-p", partition, "-o", "%N"])
    return len({line.strip() for line in out.splitlines() if line.strip()})


def waiting_jobs(partition: str) -> list[Waiting]:
    """The partition's pending jobs, highest priority first (squeue's order)."""
    out = _run(["squeue", "-h", "-t", "PD", "-p", partition, "-S", "-p", "-o", "%i|%q|%D|%r|%k"])
    found = []
    for line in out.splitlines():
        parts = line.split("|", 4)
        if len(parts) != 5 or not parts[2].strip().isdigit():
            continue
        job_id, qos, nodes, reason, comment = (p.strip() for p in parts)
        member_of = comment[len(MEMBER_TAG) :] if comment.startswith(MEMBER_TAG) else ""
        found.append(Waiting(job_id, qos, int(nodes), reason, member_of))
    return found


def job_states(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """(state, node) of each job listed (a job Slurm no longer lists is left out)."""
    if not job_ids:
        return {}
    out = _run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T|%N"])
    found = {}
    for line in out.splitlines():
        job_id, _, rest = line.strip().partition("|")
        state, _, node = rest.partition("|")
        found[job_id] = (state, node)
    return found


def submit_member(leader: str, directives: str, partition: str) -> str | None:
    """A member of `leader`'s elastic job: one node of the replica's shape; its id."""
    script = (
        f"#!/bin/bash\n{directives}\n#SBATCH --partition={partition}\n"
        f"#SBATCH --comment={MEMBER_TAG}{leader}\n"
        f"export PODIUM_ELASTIC_LEADER={leader}\n{MEMBER_BODY}"
    )
    out = _run(["sbatch", "--parsable"], stdin=script).strip()
    job_id = out.split(";")[0]
    return job_id if job_id.isdigit() else None


def cancel(job_ids: list[str]) -> None:
    if job_ids:
        _run(["scancel", *job_ids])


def signal_steps(job_ids: list[str], signum: int) -> list[str]:
    """`signum` to every task of the jobs' numbered steps (not batch or extern); the
    jobs not reached: none of their steps listed (a step srun has just launched is not
    yet, and a `squeue` that timed out lists none) or a `scancel` refused. The caller
    may try those again."""
    missed = []
    for job_id in job_ids:
        steps = job_steps(job_id)
        sent = [_ok(["scancel", f"--signal={signum}", f"{job_id}.{step}"]) for step, _ in steps]
        if not steps or not all(sent):
            missed.append(job_id)
    return missed


__all__ = [
    "MEMBER_TAG", "Waiting", "cancel", "idle_nodes", "job_states", "signal_steps",
    "submit_member", "waiting_jobs",
]  # fmt: skip
