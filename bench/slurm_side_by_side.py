"""Podium's embedded cluster and a real Slurm 22.05 cluster, side by side, one machine.

    python bench/slurm_side_by_side.py [--jobs 1000] [--compress 60]

Both get 16 declared GPUs: the embedded cluster one node of 16, Slurm two nodes of 8
(rendered by `podium slurm render --testbed`, started by scripts/slurm-testbed/up.sh;
needs root and Debian's slurm packages). They run one after the other, never at once.

1. Trivial jobs: JOBS x `true`, each submitted by its own CLI process
   (`podium submit --wrap true` vs `sbatch --wrap true`), back to back. Reported:
   submits/s, jobs/s from first submit to last end, submit->start p50/p99.
2. The Tiresias 60-job trace (../shared/traces), time-compressed COMPRESS times:
   each job is `sleep DURATION/COMPRESS` on its GPUs, submitted at SUBMIT/COMPRESS.
   Reported: average JCT (end - submit) and makespan.

Slurm reports times in whole seconds, so its latencies are rounded to 1 s; Podium's
to the millisecond. Ratios are Podium / Slurm. Results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.embedded import (
    BIN,
    EmbeddedCluster,
    compile_podium,
    embedded_config,
    slurm_definition,
    slurm_testbed,
)
from podium.api.states import TERMINAL_STATES
from podium.backends.slurm import parse
from podium.sim.traces import read_tiresias

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "tiresias_60_job.csv"
EMBEDDED = embedded_config(cpus=64, gpus=16)
SLURM = slurm_definition("bench", nodes=2, cpus=32, gpus=8)
TERMINAL = TERMINAL_STATES


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Side:
    """One system under test: how to submit and how to read the jobs back."""

    name = ""

    def submit(self, gpus: int, command: str) -> None: ...

    def jobs(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def wait_all(self, count: int, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        jobs: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            jobs = self.jobs()
            if len(jobs) >= count and all(j["state"] in TERMINAL for j in jobs):
                return jobs
            time.sleep(0.5)
        raise SystemExit(f"{self.name}: jobs did not finish in {timeout:.0f} s")


class PodiumSide(Side):
    name = "podium"

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.http = cluster.client()

    def submit(self, gpus: int, command: str) -> None:
        argv = [str(BIN / "podium"), "submit", "-Q", "-o", "/dev/null", "--wrap", command]
        if gpus:
            argv[2:2] = [f"--gpus={gpus}"]
        subprocess.run(argv, env=self.cluster.env, check=True, cwd=self.cluster.work)

    def jobs(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.http.get("/v1/jobs", params={"all": "true"}).json()[
            "jobs"
        ]
        return jobs


class SlurmSide(Side):
    name = "slurm"

    def __init__(self, directory: Path) -> None:
        self.env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        self.env.pop("SLURM_JWT", None)
        self.work = directory / "work"
        self.work.mkdir(exist_ok=True)
        self.seen = 0

    def submit(self, gpus: int, command: str) -> None:
        argv = ["sbatch", "-Q", "-o", "/dev/null", "--wrap", command]
        if gpus:
            argv[1:1] = [f"--gpus={gpus}"]
        subprocess.run(argv, env=self.env, check=True, cwd=self.work)

    def jobs(self) -> list[dict[str, Any]]:
        out = subprocess.run(
            ["squeue", "--json"], env=self.env, check=True, capture_output=True, text=True
        ).stdout
        now = time.time()
        return [parse.job_record(j, now) for j in json.loads(out)["jobs"]]


def trivial(side: Side, jobs: int) -> dict[str, float]:
    before = {j["job_id"] for j in side.jobs()}
    t0 = time.time()
    for _ in range(jobs):
        side.submit(0, "true")
    t1 = time.time()
    done = [j for j in side.wait_all(jobs + len(before), 600) if j["job_id"] not in before]
    last_end = max(j["end_epoch"] for j in done)
    latency = [j["start_epoch"] - j["submit_epoch"] for j in done]
    return {
        "jobs": len(done),
        "completed": sum(j["state"] == "COMPLETED" for j in done),
        "submits_per_s": jobs / (t1 - t0),
        "jobs_per_s": jobs / max(1e-9, last_end - t0),
        "submit_start_p50_s": pct(latency, 0.5),
        "submit_start_p99_s": pct(latency, 0.99),
    }


def trace(side: Side, compress: float) -> dict[str, float]:
    before = {j["job_id"] for j in side.jobs()}
    jobs = read_tiresias(TRACE)
    t0 = time.time()
    for job in sorted(jobs, key=lambda j: j.submit_time):
        delay = t0 + job.submit_time / compress - time.time()
        if delay > 0:
            time.sleep(delay)
        side.submit(job.gpus, f"sleep {job.duration / compress:.2f}")
    done = [j for j in side.wait_all(len(jobs) + len(before), 1800) if j["job_id"] not in before]
    jct = [j["end_epoch"] - j["submit_epoch"] for j in done]
    return {
        "jobs": len(done),
        "completed": sum(j["state"] == "COMPLETED" for j in done),
        "avg_jct_s": statistics.mean(jct),
        "makespan_s": max(j["end_epoch"] for j in done) - t0,
    }


def run_slurm(jobs: int, compress: float) -> dict[str, Any]:
    with slurm_testbed(SLURM, 19800) as directory:
        side = SlurmSide(directory)
        return {"trivial": trivial(side, jobs), "trace": trace(side, compress)}


def run_podium(jobs: int, compress: float) -> dict[str, Any]:
    with EmbeddedCluster(EMBEDDED) as cluster:
        side = PodiumSide(cluster)
        return {"trivial": trivial(side, jobs), "trace": trace(side, compress)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--compress", type=float, default=60.0)
    args = parser.parse_args()
    compile_podium()
    if os.geteuid() != 0 or shutil.which("slurmctld") is None:
        raise SystemExit("needs root and Slurm (scripts/slurm-testbed/install.sh)")
    results = {"podium": run_podium(args.jobs, args.compress)}
    results["slurm"] = run_slurm(args.jobs, args.compress)
    p, s = results["podium"], results["slurm"]
    print(f"{'':28}{'podium':>12}{'slurm':>12}{'ratio':>9}")
    for part, key in (
        ("trivial", "submits_per_s"),
        ("trivial", "jobs_per_s"),
        ("trivial", "submit_start_p50_s"),
        ("trivial", "submit_start_p99_s"),
        ("trace", "avg_jct_s"),
        ("trace", "makespan_s"),
    ):
        a, b = p[part][key], s[part][key]
        ratio = a / b if b else float("inf")
        print(f"{part + ' ' + key:28}{a:12.3f}{b:12.3f}{ratio:9.2f}")
    print(
        f"completed: podium {p['trivial']['completed']}+{p['trace']['completed']}, "
        f"slurm {s['trivial']['completed']}+{s['trace']['completed']}"
    )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "slurm_side_by_side.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
