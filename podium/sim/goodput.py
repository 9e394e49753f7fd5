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

Effective training time ratio (ETTR) = work_s / wall time.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class GoodputResult:
    ettr: float  # mean over trials
    ettr_p10: float
    wall_s: float  # mean
    failures: float  # mean per run
    trials: int


def simulate_once(m: GoodputModel, rng: random.Random) -> tuple[float, int]:
    """One run: (wall seconds, failures)."""
    done = 0.0  # checkpointed useful work
    wall = 0.0
    failures = 0
    next_failure = rng.expovariate(1 / m.mtbf_s)
    while done < m.work_s:
        segment = min(m.interval_s, m.work_s - done)
        cost = segment + (m.checkpoint_s if done + segment < m.work_s else 0.0)
        if wall + cost <= next_failure:
            wall += cost
            done += segment
            continue
        wall = next_failure + m.detect_s + m.restart_s  # the segment's work is lost
        failures += 1
        next_failure = wall + rng.expovariate(1 / m.mtbf_s)
    return wall, failures


def simulate(m: GoodputModel, trials: int = 200, seed: int = 0) -> GoodputResult:
    """ETTR over `trials` seeded runs."""
    rng = random.Random(seed)
    walls, fails = [], []
    for _ in range(trials):
        wall, failures = simulate_once(m, rng)
        walls.append(wall)
        fails.append(failures)
    ettrs = sorted(m.work_s / w for w in walls)
    return GoodputResult(
        ettr=statistics.fmean(ettrs),
        ettr_p10=ettrs[len(ettrs) // 10],
        wall_s=statistics.fmean(walls),
        failures=statistics.fmean(fails),
        trials=trials,
    )


__all__ = [
    "GoodputModel",
    "GoodputResult",
    "llama3_mtbf_s",
    "simulate",
    "simulate_once",
    "young_daly_interval_s",
]
