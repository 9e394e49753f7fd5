"""How right is "when will my job start?" on real clusters: Podium's forecast
(`GET /v1/forecast`, what `podium queue --start` prints) against Slurm's own
`squeue --start` estimate, on the same jobs.

    python bench/forecast_error.py [--compress 10] [--runs 1]

The Tiresias 60-job trace (../shared/traces), time-compressed COMPRESS times, is
replayed on each side, one after the other, never at once: job j is `sleep
DURATION/COMPRESS` on its GPUs, submitted at SUBMIT/COMPRESS, with the same time limit
on both sides: the whole minutes that cover its sleep (Slurm counts limits in minutes),
so both forecasts plan with the same, generous, limits. Podium: one node of 16 declared
GPUs; Slurm 22.05: two nodes of 8 (scripts/slurm-testbed, `bf_interval=2` so its
backfill, which makes the estimates, runs every 2 s; needs root and Debian's slurm).

A poller reads every pending job's estimate every 0.5 s; a job's forecast is the first
estimate seen while it was pending; its error is its real start minus that forecast,
reported in trace seconds (times COMPRESS), median and p90 of the absolute error, over
the jobs that waited long enough to be seen pending with an estimate. Jobs that started
before either side gave an estimate are counted apart. Results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
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
from podium.sim.forecast_error import percentile
from podium.sim.traces import read_tiresias

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "tiresias_60_job.csv"
EMBEDDED = embedded_config(cpus=64, gpus=16)
SLURM = slurm_definition("forecast", nodes=2, cpus=32, gpus=8)
POLL_S = 0.5


class Side:
    """One system: submit a job, read (id, state, submit, start, estimate) of each."""

    name = ""

    def submit(self, gpus: int, seconds: float, limit_min: int) -> int:
        raise NotImplementedError

    def read(self) -> list[tuple[int, str, float, float | None, float | None]]:
        raise NotImplementedError


class PodiumSide(Side):
    name = "podium"

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.http = cluster.client()

    def submit(self, gpus: int, seconds: float, limit_min: int) -> int:
        argv = [str(BIN / "podium"), "submit", "--parsable", f"--gpus={gpus}", "-t",
                str(limit_min), "-o", "/dev/null", "--wrap", f"sleep {seconds:.2f}"]  # fmt: skip
        c = self.cluster
        done = subprocess.run(argv, env=c.env, check=True, cwd=c.work, capture_output=True,
                              text=True)  # fmt: skip
        return int(done.stdout.strip())

    def read(self) -> list[tuple[int, str, float, float | None, float | None]]:
        jobs = self.http.get("/v1/jobs", params={"all": "true"}).json()["jobs"]
        found = self.http.get("/v1/forecast").json()["jobs"]
        expected = {f["job_id"]: f["expected_start_epoch"] for f in found}
        return [
            (j["job_id"], j["state"], j["submit_epoch"], j["start_epoch"],
             expected.get(j["job_id"]))
            for j in jobs
        ]  # fmt: skip


class SlurmSide(Side):
    name = "slurm"

    def __init__(self, directory: Path) -> None:
        self.env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        self.env.pop("SLURM_JWT", None)
        self.work = directory / "work"
        self.work.mkdir(exist_ok=True)

    def submit(self, gpus: int, seconds: float, limit_min: int) -> int:
        argv = ["sbatch", "--parsable", f"--gpus={gpus}", "-t", str(limit_min),
                "-o", "/dev/null", "--wrap", f"sleep {seconds:.2f}"]  # fmt: skip
        done = subprocess.run(argv, env=self.env, check=True, cwd=self.work,
                              capture_output=True, text=True)  # fmt: skip
        return int(done.stdout.strip().split(";")[0])

    def read(self) -> list[tuple[int, str, float, float | None, float | None]]:
        out = subprocess.run(["squeue", "--json"], env=self.env, check=True,
                             capture_output=True, text=True).stdout  # fmt: skip
        rows = []
        for j in json.loads(out)["jobs"]:
            state = j["job_state"] if isinstance(j["job_state"], str) else j["job_state"][0]
            start = float(j.get("start_time") or 0) or None
            pending = state == "PENDING"
            # a pending job's start_time is the backfill scheduler's estimate (0: none)
            rows.append((int(j["job_id"]), state, float(j["submit_time"]),
                         None if pending else start, start if pending else None))  # fmt: skip
        return rows


def replay(side: Side, compress: float) -> dict[str, Any]:
    """Replay the trace on `side`; each job's first estimate while pending, its start."""
    trace = sorted(read_tiresias(TRACE), key=lambda j: j.submit_time)
    first: dict[int, float] = {}  # job -> first estimate seen while pending
    starts: dict[int, float] = {}
    submits: dict[int, float] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for job_id, state, submit, start, estimate in side.read():
                submits.setdefault(job_id, submit)
                if state == "PENDING" and estimate is not None:
                    first.setdefault(job_id, estimate)
                elif start is not None:
                    starts.setdefault(job_id, start)
            stop.wait(POLL_S)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    ours: list[int] = []
    t0 = time.time()
    for job in trace:
        delay = t0 + job.submit_time / compress - time.time()
        if delay > 0:
            time.sleep(delay)
        seconds = job.duration / compress
        ours.append(side.submit(job.gpus, seconds, max(1, math.ceil(seconds / 60))))
    deadline = time.monotonic() + 1800
    while not all(j in starts for j in ours) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    stop.set()
    poller.join()
    errors = [(starts[j] - first[j]) * compress for j in ours if j in first and j in starts]
    waited = [(starts[j] - submits[j]) * compress for j in ours if j in first and j in starts]
    absolute = [abs(e) for e in errors]
    return {
        "jobs": len(ours),
        "started": sum(j in starts for j in ours),
        "with_estimate": len(errors),
        "started_before_an_estimate": sum(j in starts and j not in first for j in ours),
        "median_abs_s": statistics.median(absolute) if absolute else None,
        "p90_abs_s": percentile(absolute, 0.9) if absolute else None,
        "median_signed_s": statistics.median(errors) if errors else None,
        "mean_wait_s": statistics.mean(waited) if waited else None,
    }


def run_podium(compress: float) -> dict[str, Any]:
    with EmbeddedCluster(EMBEDDED) as cluster:
        return replay(PodiumSide(cluster), compress)


def run_slurm(compress: float) -> dict[str, Any]:
    with slurm_testbed(SLURM, 19900) as directory:
        return replay(SlurmSide(directory), compress)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compress", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--only", choices=["podium", "slurm"], default=None)
    args = parser.parse_args()
    compile_podium()
    sides = [args.only] if args.only else ["podium", "slurm"]
    if "slurm" in sides and (os.geteuid() != 0 or shutil.which("slurmctld") is None):
        raise SystemExit("needs root and Slurm (scripts/slurm-testbed/install.sh)")
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
    for _ in range(args.runs):  # interleaved: podium, slurm, podium, slurm ...
        for name in sides:
            got = run_podium(args.compress) if name == "podium" else run_slurm(args.compress)
            results[name].append(got)
            print(name, json.dumps(got), flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "forecast_error.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
