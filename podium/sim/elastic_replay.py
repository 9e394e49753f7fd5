"""Elastic jobs in the simulator: which trace jobs are elastic, their replicas' range,
and the checkpoints the scheduler sees.

A trace job of g whole GPUs, 2 <= g <= a node's GPUs, is elastic when it is among
the `share` of such jobs picked by its id (the same jobs in every run): MIN:MAX =
max(1, g // 2):g replicas of one GPU each, its CPUs and memory split evenly. Its work
is g x duration replica-seconds, done at one replica-second per second per replica:
perfect data-parallel scaling at a constant global batch, which is optimistic (real
jobs scale less than linearly, so shrinking costs them less than this model says,
and growing gains them less).

Modes (what the three policies of docs/elastic.md compare):

- `requeue`: the picked jobs run at their trace size, rigid, and a preemption kills
  and requeues them whole, as before elastic jobs existed;
- `shrink`: they are elastic; the scheduler shrinks them instead of preempting, and
  grows them into free GPUs; victims are picked by runtime (no checkpoint is known);
- `shrink-ckpt`: as `shrink`, and the scheduler knows every running job's newest
  checkpoint (one per `checkpoint_interval_s` of progress), so victims and shrinks
  are the ones that lose least work (`scheduler.preempt_victims: least_lost_work`).

A resize keeps all the work done (the job saves at the resize signal: the contract
of docs/elastic.md) and costs the restart; a preemption loses the work since the
last checkpoint, as for every job.
"""

from __future__ import annotations

from dataclasses import replace

from podium.sched.model import Allocation, Elastic
from podium.sim.traces import TraceJob, picked_evenly

MODES = ("requeue", "shrink", "shrink-ckpt")


def is_elastic(job: TraceJob, share: float, mode: str, node_gpus: int) -> bool:
    """Whether `job` runs elastic in `mode` (never in `requeue`)."""
    if mode == "requeue" or share <= 0 or job.gpu_milli or not 2 <= job.gpus <= node_gpus:
        return False
    return picked_evenly(job, share)


def picked(job: TraceJob, share: float, node_gpus: int) -> bool:
    """Whether `job` is one of the share picked for elasticity (in every mode, so that
    `requeue` reports the same jobs)."""
    return is_elastic(job, share, "shrink", node_gpus)


def elastic_of(job: TraceJob, cap: int | None) -> Elastic:
    """The replicas' range of an elastic trace job, MAX lowered to `cap` (the size a
    resize chose for its next start)."""
    low = max(1, job.gpus // 2)
    high = job.gpus if cap is None else max(low, min(job.gpus, cap))
    return Elastic(low, high, 1, 1, -(-job.cpus // job.gpus), -(-job.mem_mb // job.gpus))


def with_checkpoint(alloc: Allocation, since: float, now: float, interval: float) -> Allocation:
    """`alloc` with its newest checkpoint: one each `interval` seconds of progress since
    `since` (None before the first)."""
    if interval <= 0:
        return replace(alloc, checkpoint_time=now)
    saved = (max(0.0, now - since) // interval) * interval
    return replace(alloc, checkpoint_time=since + saved if saved > 0 else None)
