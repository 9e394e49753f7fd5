"""torchft jobs, unchanged (--torchft; docs/resiliency.md, "torchft"): each of an
elastic job's replicas is a torchft replica group, and Podium runs the job's
lighthouse. Standard library only (the supervisor imports it at every job start).

torchft (pytorch/torchft) keeps training through the loss of a replica group: a
lighthouse forms a quorum of the groups alive at each step, a group that is lost is
left out of the next quorum while the others step on, and a group that joins is healed
live from a peer's state (its checkpoint transport). What a scheduler gives it, as
torchft's own torchx component and Slurm runner do, is one `torchrun` per replica
group, with REPLICA_GROUP_ID, NUM_REPLICA_GROUPS, TORCHFT_LIGHTHOUSE and a store
address of its own. Podium:

- runs `torchft_lighthouse`, found on the job's PATH (the torchft the job imports), in
  a process of the job's own (its user, cgroups; a process group of its own), bound
  to loopback at a port of its own, before any replica group starts; with
  `--min_replicas 1` (the survivors step on alone) and torchft's documented
  `--quorum_tick_ms 100 --join_timeout_ms 10000`. Its heartbeat timeout stays
  torchft's 5 s: the survivors' next step after a group is lost waits for it. 2 s was
  tried: in one run of nine, on a loaded machine, a group that joined after a fault
  formed a quorum of its own at step 0 instead of healing, as if a live group's late
  heartbeats had it taken for dead (not proven). TORCHFT_LIGHTHOUSE names it, unless
  the job's environment names a lighthouse of its own;
- gives each replica (task) REPLICA_GROUP_ID (its rank), NUM_REPLICA_GROUPS (the
  job's replicas) and a MASTER_ADDR:MASTER_PORT of its own: the group's `torchrun
  --nnodes=1 --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT` hosts the group's
  store there, and its workers advertise it to the other groups (torchrun's default
  address, 127.0.0.1, does only where every group is on one machine);
- with spares, on a fault of one group (an Xid on its GPU, its torchrun or worker
  killed or crashed) kills that group alone, its orphaned workers included, fences
  its GPUs and starts the job's command as the same REPLICA_GROUP_ID on a spare's
  GPUs (podium.run.replica_faults). The other groups keep their processes; the new
  one joins the next quorum and heals from a peer, as torchft is designed for. No
  notice and no SIGURG: the lighthouse is the membership.
"""

from __future__ import annotations

from podium.run.torchelastic import executable_on_path

LIGHTHOUSE = "torchft_lighthouse"
LIGHTHOUSE_ENV = "TORCHFT_LIGHTHOUSE"
GROUP_ENV = "REPLICA_GROUP_ID"
GROUPS_ENV = "NUM_REPLICA_GROUPS"
JOIN_TIMEOUT_MS = 10000  # torchft's README's (its default: 60000)


def lighthouse_binary(path: str) -> str | None:
    """`torchft_lighthouse` on the job's PATH: a regular file the effective user may
    run (call it as the job's user, Identity.entered); None when there is none."""
    return executable_on_path(LIGHTHOUSE, path)


def lighthouse_argv(binary: str, port: int, host: str = "127.0.0.1") -> list[str]:
    """The lighthouse's command line: at host:`port` (see the module's docstring)."""
    return [
        binary,
        "--min_replicas", "1",
        "--quorum_tick_ms", "100",
        "--join_timeout_ms", str(JOIN_TIMEOUT_MS),
        "--bind", f"{host}:{port}",
    ]  # fmt: skip


def torchft_environment(env: dict[str, str], group: int, groups: int, lighthouse: str) -> None:
    """Podium's settings for one replica group's task, into `env`: its group id and the
    job's count; TORCHFT_LIGHTHOUSE for the lighthouse at URL `lighthouse` ("": none
    runs) unless the job's environment names one of its own."""
    env[GROUP_ENV] = str(group)
    env[GROUPS_ENV] = str(groups)
    if lighthouse:
        env.setdefault(LIGHTHOUSE_ENV, lighthouse)


__all__ = [
    "LIGHTHOUSE_ENV",
    "lighthouse_argv",
    "lighthouse_binary",
    "torchft_environment",
]
