"""What hot spares would buy at scale: the goodput simulator (podium.sim.goodput) at
16,384 GPUs with Llama 3's failure rate, today's kill-and-requeue against replacing a
failed replica from a spare (issue 48).

    python bench/goodput_spares.py [--seeds 1 2 3] [--trials 60]

Assumptions, each a flag:
  --confined 0.78      share of failures confined to one replica (one GPU or host): Llama
                       3 405B's report attributes about 78 % of its 419 unexpected
                       interruptions to confirmed or suspected hardware; the rest
                       (software, network fabric, ...) still restart the whole job
  --detect-s 0.4       fault to detection, as measured (docs/benchmarks.md, "Goodput")
  --restart-s 330      detection to the first step after a full restart: the measured
                       ~30 s plus 300 s of start-up at scale (the same as bench/goodput.py)
  --replace-s 1.2 10 60  detection to the next step when a spare takes the place:
                       1.2 s is the median measured on an H200 with a warm standby
                       (bench/recovery.py --cuda, Xid 79), 10 and 60 s slower cases
  --refill-s 3600      until a used spare is back in the pool (repaired, or refilled
                       from free capacity: Podium refills at once where a GPU is free,
                       declared GPUs only; --refill-s 1e9 is a pool never refilled)
  --checkpoint-s 60 10 the stall of one checkpoint: synchronous, and asynchronous
  --spares 0 1 2 4     spare replicas (nodes of 8 GPUs), held and charged

The checkpoint interval is Young/Daly's for the failures that still restart the job.
Prints, per setting, ETTR min/median/max over the seeds, and the same charged for the
spare GPUs held (`held_ettr`). A simulation, not a measurement of Podium.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.sim.goodput import (
    GoodputModel,
    held_ettr,
    llama3_mtbf_s,
    simulate,
    young_daly_interval_s,
)

GPUS = 16_384
GPUS_PER_SPARE = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--days", type=float, default=30)
    parser.add_argument("--confined", type=float, default=0.78)
    parser.add_argument("--detect-s", type=float, default=0.4)
    parser.add_argument("--restart-s", type=float, default=330)
    parser.add_argument("--replace-s", type=float, nargs="+", default=[1.2, 10, 60])
    parser.add_argument("--refill-s", type=float, default=3600)
    parser.add_argument("--checkpoint-s", type=float, nargs="+", default=[60, 10])
    parser.add_argument("--spares", type=int, nargs="+", default=[0, 1, 2, 4])
    args = parser.parse_args()
    mtbf = llama3_mtbf_s(GPUS)
    print(
        f"{GPUS} GPUs, job MTBF {mtbf / 3600:.2f} h, {args.days:g} days of work, "
        f"confined {args.confined:g}, refill {args.refill_s:g} s, seeds {args.seeds}"
    )
    print(f"{'ckpt_s':>6} {'spares':>6} {'replace_s':>9} {'interval':>9} "
          f"{'ETTR min/median/max':>21} {'held ETTR':>9} {'replaced':>9}")  # fmt: skip
    for checkpoint_s in args.checkpoint_s:
        for spares in args.spares:
            for replace_s in args.replace_s if spares else [0.0]:
                confined = args.confined if spares else 0.0
                interval = young_daly_interval_s(checkpoint_s, mtbf / (1 - confined))
                model = GoodputModel(
                    args.days * 86400, mtbf, interval, checkpoint_s, args.detect_s,
                    args.restart_s, spares, confined, replace_s, args.refill_s,
                )  # fmt: skip
                runs = [simulate(model, args.trials, seed) for seed in args.seeds]
                ettrs = sorted(r.ettr for r in runs)
                held = held_ettr(statistics.median(ettrs), GPUS, spares * GPUS_PER_SPARE)
                replaced = statistics.fmean(r.replaced / max(r.failures, 1) for r in runs)
                print(
                    f"{checkpoint_s:6g} {spares:6d} {replace_s or '-':>9} "
                    f"{interval / 60:7.1f} m {ettrs[0]:.3f}/{statistics.median(ettrs):.3f}/"
                    f"{ettrs[-1]:.3f} {held:9.3f} {replaced:8.0%}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
