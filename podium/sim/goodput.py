"""Goodput of one long training job under random failures: a seeded Monte Carlo and
the Young/Daly checkpoint interval. Pure (no I/O, no clock).

The job needs `work_s` seconds of useful computation. It checkpoints every
`interval_s` of useful work, each checkpoint costing `checkpoint_s` (training pauses).
Failures arrive as a Poisson process with mean `mtbf_s` (the whole job's MTBF: a
cluster's per-GPU failure rate times its GPUs). A failure loses the work since the
last checkpoint, then costs `detect_s` (fault to detection) plus `restart_s`
(detection to the first step after restart: requeue, start, load the checkpoint).
Without auto-resume a person or a cron job notices the failure: `detect_s` is that
delay instead.

With hot spares (`spares` > 0) a failure confined to one replica (a share `confined` of
them: one GPU or host, not a job-wide fault) is handled by replacing that replica: a
spare takes its place and receives the current state from a surviving replica, so no
work is lost and the job pauses only `detect_s + replace_s`. The used spare returns to
the pool `refill_s` later (repaired, or refilled from free capacity); a confined
failure that finds the pool empty, and every job-wide failure, restarts the job from
its last checkpoint as above.

Effective training time ratio (ETTR) = work_s / wall time. Spares are GPUs held and not
training: `held_ettr` charges them.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from dataclasses import dataclass

LLAMA3_GPUS = 16_384
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54


def llama3_mtbf_s(gpus: int = LLAMA3_GPUS) -> float:
    """The job MTBF at `gpus` GPUs with Llama 3 405B's failure rate (419 unexpected
    interruptions in 54 days on 16,384 GPUs), assuming failures scale with GPUs."""
    per_gpu_rate = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 86400 * LLAMA3_GPUS)
    return 1.0 / (per_gpu_rate * gpus)


def young_daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young/Daly: the checkpoint interval that minimises expected waste, sqrt(2 C M)."""
    return math.sqrt(2 * checkpoint_s * mtbf_s)


@dataclass(frozen=True)
class GoodputModel:
    work_s: float
    mtbf_s: float
    interval_s: float
    checkpoint_s: float
    detect_s: float
    restart_s: float
    spares: int = 0  # the job's hot spares (replicas' worth)
    confined: float = 0.0  # share of failures confined to one replica
    replace_s: float = 0.0  # detection to the next step when a spare takes the place
    refill_s: float = 0.0  # until a used spare is back in the pool


@dataclass(frozen=True)
class GoodputResult:
    ettr: float  # mean over trials
    ettr_p10: float
    wall_s: float  # mean
    failures: float  # mean per run
    trials: int
    replaced: float = 0.0  # mean per run: failures a spare took, no restart


def simulate_once(m: GoodputModel, rng: random.Random) -> tuple[float, int, int]:
    """One run: (wall seconds, failures, failures a spare took)."""
    done = 0.0  # checkpointed useful work
    wall = 0.0
    failures = replaced = 0
    back: list[float] = []  # when each spare in use returns to the pool
    progress = 0.0  # work since the last checkpoint that survived a replacement
    next_failure = rng.expovariate(1 / m.mtbf_s)
    while done < m.work_s:
        segment = min(m.interval_s, m.work_s - done)
        cost = segment - progress + (m.checkpoint_s if done + segment < m.work_s else 0.0)
        if wall + cost <= next_failure:
            wall += cost
            done += segment
            progress = 0.0
            continue
        failures += 1
        while back and back[0] <= next_failure:
            heapq.heappop(back)
        if m.spares and m.confined and len(back) < m.spares and rng.random() < m.confined:
            heapq.heappush(back, next_failure + m.refill_s)
            progress += min(segment - progress, next_failure - wall)  # the survivors keep it
            wall = next_failure + m.detect_s + m.replace_s
            replaced += 1
        else:
            progress = 0.0  # back to the last checkpoint
            wall = next_failure + m.detect_s + m.restart_s
        next_failure = wall + rng.expovariate(1 / m.mtbf_s)
    return wall, failures, replaced


def simulate(m: GoodputModel, trials: int = 200, seed: int = 0) -> GoodputResult:
    """ETTR over `trials` seeded runs."""
    rng = random.Random(seed)
    walls, fails, took = [], [], []
    for _ in range(trials):
        wall, failures, replaced = simulate_once(m, rng)
        walls.append(wall)
        fails.append(failures)
        took.append(replaced)
    ettrs = sorted(m.work_s / w for w in walls)
    return GoodputResult(
        ettr=statistics.fmean(ettrs),
        ettr_p10=ettrs[len(ettrs) // 10],
        wall_s=statistics.fmean(walls),
        failures=statistics.fmean(fails),
        trials=trials,
        replaced=statistics.fmean(took),
    )


def held_ettr(ettr: float, gpus: int, spare_gpus: int) -> float:
    """ETTR over every GPU the job holds: its `gpus` training and its `spare_gpus`
    waiting (a spare trains only once it has taken a failed replica's place)."""
    return ettr * gpus / (gpus + spare_gpus)


__all__ = [
    "GoodputModel",
    "GoodputResult",
    "held_ettr",
    "llama3_mtbf_s",
    "simulate",
    "simulate_once",
    "young_daly_interval_s",
]
