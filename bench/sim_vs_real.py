"""Does the simulator tell the truth? The Tiresias 60-job trace replayed for real on
the embedded cluster (16 declared GPUs, `sleep` jobs) beside `podium sim` of the same
trace on the same node, same policy, same time limits.

    python bench/sim_vs_real.py [--compress 60] [--runs 3]

Real: job j is `sleep DURATION/COMPRESS` submitted at SUBMIT/COMPRESS with the time
limit DURATION/COMPRESS + 1 s (what backfill plans with; the second keeps the limit
from killing a job that is about to end), through `podium submit`, one process each.
Simulated: the same jobs with the same limits (times COMPRESS), through the daemon's
own policy (`policy_from_config` of the same cluster config), a pass after every event.
Average JCT in trace seconds (real times COMPRESS), min / median / max over the runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.embedded import BIN, EmbeddedCluster, compile_podium, embedded_config
from podium.config.cluster import parse_config
from podium.sched.config_policy import policy_from_config
from podium.sim import engine
from podium.sim.engine import SimOptions, simulate, uniform_nodes
from podium.sim.metrics import summarize
from podium.sim.traces import TraceJob, read_tiresias

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "tiresias_60_job.csv"
CONFIG = embedded_config(cpus=64, gpus=16)


def real(jobs: list[TraceJob], compress: float) -> float:
    """Average JCT (trace seconds) of one real replay."""
    with EmbeddedCluster(CONFIG) as cluster:
        http = cluster.client()
        t0 = time.time()
        for job in jobs:
            delay = t0 + job.submit_time / compress - time.time()
            if delay > 0:
                time.sleep(delay)
            seconds = job.duration / compress
            argv = [str(BIN / "podium"), "submit", "-Q", "-o", "/dev/null", f"--gpus={job.gpus}",
                    "-t", _limit(seconds + 1), "--wrap", f"sleep {seconds:.2f}"]  # fmt: skip
            subprocess.run(argv, env=cluster.env, check=True, cwd=cluster.work)
        deadline = time.monotonic() + 1800
        while True:
            done = http.get("/v1/jobs", params={"all": "true"}).json()["jobs"]
            if len(done) >= len(jobs) and all(j["end_epoch"] for j in done):
                break
            assert time.monotonic() < deadline, "the replay did not finish"
            time.sleep(0.5)
        jct = [j["end_epoch"] - j["submit_epoch"] for j in done]
        return float(statistics.mean(jct)) * compress


def _limit(seconds: float) -> str:
    """A time limit of whole seconds as `-t` takes it (MM:SS)."""
    total = int(seconds + 0.999)
    return f"{total // 60}:{total % 60:02d}"


def simulated(jobs: list[TraceJob], compress: float) -> float:
    """Average JCT of the same jobs and limits in the simulator, the daemon's policy."""
    limited = [replace(j, time_limit=(j.duration / compress + 1) * compress) for j in jobs]
    engine.POLICIES["daemon"] = policy_from_config(parse_config(CONFIG, "bench"))
    result = simulate(limited, uniform_nodes(1, 16, 64, 64000), "daemon", SimOptions())
    return float(summarize(result)["avg_jct_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compress", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compile_podium()
    jobs = sorted(read_tiresias(TRACE), key=lambda j: j.submit_time)
    sim = simulated(jobs, args.compress)
    runs = []
    for _ in range(args.runs):
        runs.append(real(jobs, args.compress))
        print(f"real avg JCT {runs[-1]:.1f} s", flush=True)
    mid = statistics.median(runs)
    print(f"simulated {sim:.1f} s; real {min(runs):.1f} / {mid:.1f} / {max(runs):.1f} s "
          f"(min / median / max); real / simulated {mid / sim:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
