"""Goodput under injected faults: the real training job, with and without auto-resume.

    python bench/goodput.py [--steps 400] [--mtbf 12] [--poll 10] [--seed 1]

On a fresh embedded cluster (4 declared GPUs, the health agent watching a kernel log,
reset_command `true` so fenced GPUs come back after their deep check):
  reference   the job (examples/train.py, GPT, 2 ranks on 2 GPUs) with no fault: the
              useful time per step, and the wall time without faults;
  auto-resume the same job with --auto-resume; faults arrive at random (exponential,
              mean --mtbf seconds): each is an Xid 48 (uncontained ECC: drain and
              reset) on one of the job's GPUs, written to the watched kernel log;
  baseline    the same fault process, no auto-resume: the job ends NODE_FAIL and an
              operator script polling every --poll seconds resubmits it (same
              checkpoint directory).
For each it reports wall time, effective training time ratio (ETTR = steps x useful
time per step / wall time), time from fault to detection (the job's requeue or end)
and from fault to the first training step after the restart. It then feeds the
measured times to the goodput simulator (podium.sim.goodput) to check it against the
measurement, and asks it about 16,384 GPUs at Llama 3's failure rate with the
Young/Daly checkpoint interval. Results go to stdout and bench/results/.
This is a benchmark, not a test: numbers vary with the machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from embedded import EmbeddedCluster

from podium.api.states import TERMINAL_STATES
from podium.cli.fault_demo import read_progress
from podium.sim.goodput import (
    GoodputModel,
    llama3_mtbf_s,
    simulate,
    young_daly_interval_s,
)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TERMINAL = TERMINAL_STATES
CONFIG = """\
node:
  name: bench0
  cpus: 8
  memory_mb: 16000
  gpus: {source: declared, count: 4, type: h100}
kill_wait_s: 5
scheduler_interval_s: 0.2
health:
  kernel_log: {home}/kern.log
  interval_s: 0.5
  deep_interval_s: 86400
  reset_command: "true"
  retry_s: 1
  max_faults: 1000
"""


class Cluster(EmbeddedCluster):
    def __init__(self) -> None:
        super().__init__(CONFIG, prefix="podium-goodput-")
        self.kernel_log = self.home / "kern.log"
        self.kernel_log.touch()

    def submit(self, client: httpx.Client, args: argparse.Namespace, tag: str, resume: int) -> int:
        progress = self.work / f"{tag}.jsonl"
        command = (
            f"exec {sys.executable} {ROOT / 'examples' / 'train.py'} --model gpt "
            f"--steps {args.steps} --checkpoint-every {args.checkpoint_every} "
            f"--step-time {args.step_time} --progress {progress}"
        )
        body = {
            "wrap": command,
            "cwd": str(self.work),
            "environment": {"PATH": os.environ["PATH"]},
            "options": [
                "--ntasks=2",
                "--gpus-per-task=1",
                f"--job-name={tag}",
                f"--output={tag}-%j.out",
                f"--checkpoint-dir={self.work / ('ckpt-' + tag)}",
                f"--auto-resume={resume}",
            ],
        }
        r = client.post("/v1/jobs", json=body)
        r.raise_for_status()
        return int(r.json()["jobs"][0]["job_id"])

    def inject(self, client: httpx.Client, gpu: int) -> None:
        """An Xid 48 for `gpu`, written by the daemon (`podium inject xid`) into the
        kernel log its agent watches, with the bus id this cluster declares it at."""
        client.post("/v1/inject", json={"kind": "xid", "gpu": gpu, "code": 48}).raise_for_status()


class Injector(threading.Thread):
    """Faults at exponential intervals on one of the running job's GPUs."""

    def __init__(self, cluster: Cluster, mtbf: float, seed: int) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.mtbf = mtbf
        self.rng = random.Random(seed)
        self.job_ids: list[int] = []
        self.stop = threading.Event()
        self.faults: list[float] = []
        self.missed = 0

    def run(self) -> None:
        with self.cluster.client() as client:
            while not self.stop.wait(self.rng.expovariate(1 / self.mtbf)):
                if not self.job_ids:
                    continue
                job = client.get(f"/v1/jobs/{self.job_ids[-1]}").json()
                if job["state"] != "RUNNING" or not job["gpu_ids"]:
                    self.missed += 1  # the fault hit hardware the job was not on
                    continue
                self.cluster.inject(client, self.rng.choice(job["gpu_ids"]))
                self.faults.append(time.time())


def one_run(args: argparse.Namespace, mode: str) -> dict[str, Any]:
    with Cluster() as cluster, cluster.client() as client:
        injector = Injector(cluster, args.mtbf, args.seed) if mode != "reference" else None
        t0 = time.time()
        job_id = cluster.submit(client, args, mode, args.max_restarts if mode == "auto" else 0)
        if injector is not None:
            injector.job_ids.append(job_id)
            injector.start()
        detections: list[float] = []
        jobs = [job_id]
        deadline = time.monotonic() + args.timeout
        while True:
            job = client.get(f"/v1/jobs/{jobs[-1]}").json()
            if job["state"] == "COMPLETED":
                break
            if job["state"] in TERMINAL:  # baseline: the operator notices and resubmits
                detections.append(time.time())
                jobs.append(cluster.submit(client, args, mode, 0))
                if injector is not None:
                    injector.job_ids.append(jobs[-1])
            if time.monotonic() > deadline:
                raise SystemExit(f"{mode}: the job did not finish in {args.timeout}s")
            time.sleep(args.poll if mode == "baseline" else 0.2)
        wall = job["end_epoch"] - t0
        if injector is not None:
            injector.stop.set()
            injector.join()
        faults = injector.faults if injector else []
        if mode == "auto":
            events = client.get(f"/v1/jobs/{job_id}").json()["events"]
            detections = [e["time"] for e in events if e["kind"] == "requeue"]
        progress = read_progress(cluster.work / f"{mode}.jsonl")
    steps = [r for r in progress if r["event"] == "step"]
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(steps) if b["step"] == a["step"] + 1]
    # Each fault killed the run it hit: pair it with the first detection after it (the
    # requeue, or the operator noticing) and the first training step after that.
    detect, to_step = [], []
    pending = sorted(detections)
    for f in faults:
        seen = next((d for d in pending if d >= f), None)
        if seen is None:
            continue
        pending.remove(seen)
        detect.append(seen - f)
        first = next((r["t"] for r in steps if r["t"] > seen), None)
        if first is not None:
            to_step.append(first - f)
    return {
        "mode": mode,
        "wall_s": wall,
        "step_s": statistics.median(gaps) if gaps else None,
        "faults": len(faults),
        "interruptions": len(detections),
        "detect_s": detect,
        "fault_to_first_step_s": to_step,
        "startup_s": (steps[0]["t"] - t0) if steps else None,
        "steps_redone": len(steps) - args.steps,
    }


def mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--step-time", type=float, default=0.03)
    parser.add_argument("--checkpoint-every", type=int, default=25)
    parser.add_argument("--mtbf", type=float, default=12.0, help="mean seconds between faults")
    parser.add_argument("--poll", type=float, default=10.0, help="baseline operator's poll (s)")
    parser.add_argument("--max-restarts", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1200.0)
    parser.add_argument("--scale-checkpoint-s", type=float, default=60.0)
    parser.add_argument("--scale-startup-s", type=float, default=300.0)
    parser.add_argument("--scale-operator-s", type=float, default=1800.0)
    args = parser.parse_args()

    results = {mode: one_run(args, mode) for mode in ("reference", "auto", "baseline")}
    step_s = results["reference"]["step_s"]
    useful = args.steps * step_s
    for r in results.values():
        r["ettr"] = useful / r["wall_s"]
    print(
        f"{'mode':<10} {'wall_s':>7} {'ETTR':>6} {'faults':>6} {'interrupts':>10} "
        f"{'detect_s':>9} {'fault->step_s':>13} {'redone':>6}"
    )
    for r in results.values():
        d, s = mean(r["detect_s"]), mean(r["fault_to_first_step_s"])
        print(
            f"{r['mode']:<10} {r['wall_s']:7.1f} {r['ettr']:6.3f} {r['faults']:6d} "
            f"{r['interruptions']:10d} {'-' if d is None else f'{d:9.2f}':>9} "
            f"{'-' if s is None else f'{s:13.2f}':>13} {r['steps_redone']:6d}"
        )

    # The simulator, fed what was measured here, against the measurement.
    ref_overhead = results["reference"]["wall_s"] - useful  # start-up and end
    predictions = {}
    for mode in ("auto", "baseline"):
        r = results[mode]
        detect = mean(r["detect_s"]) or 0.0
        restart = max(0.0, (mean(r["fault_to_first_step_s"]) or 0.0) - detect)
        model = GoodputModel(
            work_s=useful,
            mtbf_s=args.mtbf,
            interval_s=args.checkpoint_every * step_s,
            checkpoint_s=0.0,
            detect_s=detect,
            restart_s=restart,
        )
        sim = simulate(model, trials=500, seed=args.seed)
        predicted = useful / (sim.wall_s + ref_overhead)
        predictions[mode] = {"predicted_ettr": predicted, "measured_ettr": r["ettr"]}
        print(f"simulator, {mode}: predicted ETTR {predicted:.3f}, measured {r['ettr']:.3f}")

    # At scale: 16,384 GPUs, Llama 3's failure rate, Young/Daly interval.
    mtbf = llama3_mtbf_s()
    c = args.scale_checkpoint_s
    interval = young_daly_interval_s(c, mtbf)
    auto_detect = mean(results["auto"]["detect_s"]) or 0.0
    auto_restart = max(0.0, (mean(results["auto"]["fault_to_first_step_s"]) or 0.0) - auto_detect)
    scale = {}
    for mode, detect, restart in (
        ("auto-resume", auto_detect, auto_restart + args.scale_startup_s),
        ("baseline", args.scale_operator_s, auto_restart + args.scale_startup_s),
    ):
        for label, t in (("young-daly", interval), ("hourly", 3600.0)):
            model = GoodputModel(30 * 86400, mtbf, t, c, detect, restart)
            sim = simulate(model, trials=100, seed=args.seed)
            scale[f"{mode}/{label}"] = {
                "ettr": sim.ettr,
                "ettr_p10": sim.ettr_p10,
                "failures_per_30_days": sim.failures,
                "interval_s": t,
            }
    print(
        f"\n16,384 GPUs at Llama 3's rate: job MTBF {mtbf / 3600:.2f} h; checkpoint {c:.0f}s; "
        f"Young/Daly interval {interval / 60:.1f} min; "
        f"restart = measured + {args.scale_startup_s:.0f}s"
    )
    for key, v in scale.items():
        print(
            f"  {key:<24} ETTR {v['ettr']:.3f} (p10 {v['ettr_p10']:.3f}), "
            f"{v['failures_per_30_days']:.0f} failures / 30 days"
        )

    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "args": vars(args),
        "results": results,
        "simulator_check": predictions,
        "at_scale": {"mtbf_s": mtbf, "young_daly_s": interval, "policies": scale},
        "time": time.time(),
    }
    path = out / f"goodput-{int(time.time())}.json"
    path.write_text(json.dumps(record, indent=2))
    print(f"\nwritten {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
