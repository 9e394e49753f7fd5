"""Elastic training under a burst of high-priority jobs: kill-and-requeue against
shrink/grow, with and without checkpoint-aware victims.

    python bench/elastic.py [--runs 3] [--window 150] [--grow-delay 1:00] [--min-stable 5:00]

On a fresh embedded cluster of 8 declared GPUs, two low-QoS training jobs run; from
t = 8 s a burst of high-QoS jobs arrives (6 jobs of 2 GPUs, 8 s each, one every 4 s).
The training jobs are synthetic ranks (one process per replica, real signals, real
restarts): rank 0 counts work in replica-seconds (every replica does one per second),
saves it to PODIUM_CHECKPOINT_DIR every 4 s, and takes `--startup` seconds to start
(a framework's imports and checkpoint load). Told to stop (SIGTERM) or to resize
(SIGUSR1), a rank exits at once without saving, as a job that only checkpoints on a
schedule does: what it did since its last checkpoint is lost.

Policies, interleaved run by run:
  a  kill-and-requeue: fixed 4-GPU jobs, the high QoS preempts the low (requeue),
     victims by least runtime (Slurm's choice, Podium's before issue 31);
  b  shrink/grow: --elastic=1:4, shrunk instead of preempted, grown back when GPUs
     free up; victims by least runtime;
  c  shrink/grow with checkpoint-aware victims: as b, the job losing least since its
     last checkpoint is shrunk.
Reported per policy (min/median/max over runs): useful work of the training jobs
(replica-hours per hour of window that their runs going at the end had kept: what a
stop or resize lost is not in it), the high jobs' wait (submit to start), GPU
utilisation (GPUs held, sampled every 0.25 s, over 8), the GPU-seconds the training
jobs lost (Podium's own accounting, `lost_gpu_seconds`), and resizes and requeues.
Results go to stdout and bench/results/elastic-grow-DELAY.json. A benchmark, not a
test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from embedded import EmbeddedCluster

ROOT = Path(__file__).resolve().parent.parent
CONFIG = """\
node: {{name: node0, cpus: 16, memory_mb: 16000,
       gpus: {{source: declared, count: 8, type: h100, memory_mb: 81920}}}}
qos:
  - {{name: high, priority: 1000, preempt: [low]}}
  - {{name: normal, priority: 100}}
  - {{name: low, priority: 10}}
scheduler: {{preempt_victims: {victims}}}
elastic: {{min_stable: "{min_stable}", grow_delay: "{grow_delay}"}}
health: {{interval_s: 0.5}}
kill_wait_s: 2
scheduler_interval_s: 0.2
"""
WORKER = r"""
import json, os, signal, sys, time
rank = int(os.environ.get("RANK") or os.environ["SLURM_PROCID"])  # srun's, in one step
world = int(os.environ.get("REPLICAS") or os.environ["WORLD_SIZE"])
ckpt = os.path.join(os.environ["PODIUM_CHECKPOINT_DIR"], "units.json")
every, startup = float(sys.argv[1]), float(sys.argv[2])
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))  # no save: since the last is lost
signal.signal(signal.SIGUSR1, lambda *a: sys.exit(0))
time.sleep(startup)
try:
    with open(ckpt) as fh:
        units = json.load(fh)["units"]
except FileNotFoundError:
    units = 0.0
last = time.time()
done = os.path.join(os.environ["PODIUM_CHECKPOINT_DIR"], "..", os.path.basename(
    os.environ["PODIUM_CHECKPOINT_DIR"]) + ".progress")
def write(path, value):
    with open(path + ".tmp", "w") as fh:
        json.dump({"units": value}, fh)
    os.replace(path + ".tmp", path)
while True:
    time.sleep(0.1)
    if rank == 0:
        units += world * 0.1
        write(done, units)  # the work this run has kept so far (outside the checkpoints)
        if time.time() - last >= every:
            write(ckpt, units)
            last = time.time()
"""
POLICIES = {
    "a": ("kill-and-requeue", False, "least_runtime"),
    "b": ("shrink/grow", True, "least_runtime"),
    "c": ("shrink/grow + checkpoint-aware victims", True, "least_lost_work"),
}


def submit(http: httpx.Client, work: Path, options: list[str], wrap: str) -> int:
    body = {"wrap": wrap, "cwd": str(work), "options": options}
    r = http.post("/v1/jobs", json=body)
    r.raise_for_status()
    return int(r.json()["jobs"][0]["job_id"])


def one_run(policy: str, args: argparse.Namespace) -> dict[str, Any]:
    _, elastic, victims = POLICIES[policy]
    config = CONFIG.format(victims=victims, min_stable=args.min_stable, grow_delay=args.grow_delay)
    with EmbeddedCluster(config, prefix="podium-elastic-") as c:
        (c.work / "worker.py").write_text(WORKER)
        wrap = f"exec {sys.executable} worker.py 4 {args.startup}"
        shape = ["--elastic=1:4", "--gpus-per-task=1"] if elastic else [
            "--gpus=4", "--export=ALL,REPLICAS=4"]  # fmt: skip
        held: list[int] = []
        stop = threading.Event()
        with c.client() as http:
            began = time.monotonic()
            trainers = []
            for i in range(2):
                ckpt = c.work / f"ckpt-{i}"
                ckpt.mkdir()
                options = ["--qos=low", f"--checkpoint-dir={ckpt}", "-o", f"train{i}-%j.out"]
                trainers.append(submit(http, c.work, [*options, *shape], wrap))
                time.sleep(2.0)  # their checkpoints out of phase

            def sample() -> None:
                with c.client() as watch:
                    while not stop.is_set():
                        jobs = watch.get("/v1/jobs", params={"state": "RUNNING"}).json()["jobs"]
                        held.append(sum(j["gpus"] for j in jobs))
                        time.sleep(0.25)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            time.sleep(max(0.0, 8.0 - (time.monotonic() - began)))
            urgent = []
            for _ in range(6):
                urgent.append(submit(http, c.work, ["--qos=high", "--gpus=2"], "sleep 8"))
                time.sleep(4.0)
            time.sleep(max(0.0, args.window - (time.monotonic() - began)))
            stop.set()
            sampler.join()
            records = {j: http.get(f"/v1/jobs/{j}").json() for j in trainers + urgent}
        saved = []
        for i in range(2):  # what the run going at the window's end had kept
            path = c.work / f"ckpt-{i}.progress"
            saved.append(json.loads(path.read_text())["units"] if path.exists() else 0.0)
        useful = sum(saved)
        lost = sum(sum(records[j]["lost_gpu_seconds"].values()) for j in trainers)
        if args.verbose:
            for j in trainers:
                print(policy, j, [(round(e["time"] - records[j]["submit_epoch"], 1), e["kind"],
                                   e["detail"]) for e in records[j]["events"]], saved)  # fmt: skip
        waits = [
            records[j]["start_epoch"] - records[j]["submit_epoch"]
            for j in urgent
            if records[j]["start_epoch"] is not None
        ]
        events = [e["kind"] for j in trainers for e in records[j]["events"]]
        return {
            "policy": policy,
            "useful_replica_h_per_h": useful / args.window,
            "high_wait_s": statistics.mean(waits) if waits else None,
            "high_started": len(waits),
            "gpu_util": statistics.mean(held) / 8 if held else 0.0,
            "lost_gpu_s": lost,
            "resizes": events.count("resize"),
            "requeues": events.count("requeue"),
        }


def summary(rows: list[dict[str, Any]], key: str) -> str:
    values = sorted(r[key] for r in rows if r[key] is not None)
    if not values:
        return "-"
    return f"{values[0]:.2f} / {statistics.median(values):.2f} / {values[-1]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=float, default=150.0)
    parser.add_argument("--grow-delay", default="1:00", help="elastic.grow_delay (default 1:00)")
    parser.add_argument("--min-stable", default="5:00", help="elastic.min_stable (default 5:00)")
    parser.add_argument("--startup", type=float, default=3.0)
    parser.add_argument("--policies", default="abc")
    parser.add_argument("--verbose", action="store_true", help="print each training job's events")
    args = parser.parse_args()
    results: list[dict[str, Any]] = []
    for run in range(args.runs):
        for policy in args.policies:
            row = one_run(policy, args)
            row["run"] = run
            results.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{'policy':44} {'useful (min/med/max)':22} {'high wait s':20} {'GPU util':20} "
          f"{'lost GPU-s':24} resizes requeues")  # fmt: skip
    for policy in args.policies:
        rows = [r for r in results if r["policy"] == policy]
        print(
            f"{policy} {POLICIES[policy][0]:42} {summary(rows, 'useful_replica_h_per_h'):22} "
            f"{summary(rows, 'high_wait_s'):20} {summary(rows, 'gpu_util'):20} "
            f"{summary(rows, 'lost_gpu_s'):24} "
            f"{statistics.median(r['resizes'] for r in rows):7} "
            f"{statistics.median(r['requeues'] for r in rows):8}"
        )
    out = ROOT / "bench" / "results" / f"elastic-grow-{args.grow_delay.replace(':', '')}.json"
    out.write_text(json.dumps({"args": vars(args), "runs": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
