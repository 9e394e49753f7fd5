"""The embedded daemon with 10,000 pending jobs, beside slurmctld with the same queue,
through each side's CLI and through each side's REST API, sides interleaved run by run.

    python bench/scale.py [--runs 3] [--pending 10000]
                          [--sides podium,slurm-default,slurm-tuned] [--arrays]

Each side gets one node of 8 declared GPUs kept busy by 8 one-GPU `sleep` jobs, then
PENDING more one-GPU jobs that cannot start, submitted one by one through the side's
REST API from 2 threads (Podium's API on its unix socket; Slurm's slurmrestd on a
unix socket, openapi/v0.0.38, local authentication), with varied nice values (with
--arrays: arrays of 1,000 tasks through the CLI, quicker to fill; slurmctld keeps an
array as one record until its tasks start, so compare Slurm with single jobs).
Measured with the queue full:
  fill_per_s          submissions per second while the queue filled (API, 2 threads);
  submit_cli_p50_ms   one more job by the CLI, the whole process (`podium submit` /
                      `sbatch`), median of 30;
  submit_api_p50_ms   one more job by the REST API (POST /v1/jobs / POST
                      /slurm/v0.0.38/job/submit), median of 30;
  ping_p99_ms         Podium only: GET /v1/ping every 10 ms while a job is submitted
                      every 100 ms (each submit prompts a scheduling pass);
  queue_json_s        `podium queue --json` / `squeue -r --json`, the whole command;
  table_s             `podium queue` / `squeue -r`, the whole command;
  list_api_s          GET /v1/jobs / GET /slurm/v0.0.38/jobs;
  idle_controller_pct the controller's CPU (the daemon / slurmctld) over 20 idle s,
                      in % of one core;
  idle_cluster_pct    the same for the whole cluster: Podium's daemon and its
                      children; slurmctld, the slurmd, munged and slurmrestd;
  rss_mb              the controller's resident memory;
  table_1k_s          the table with 1,000 jobs left (the rest cancelled).
Slurm's sides: `slurm-default`, SchedulerParameters unset (sched_interval=60,
bf_interval=30: Slurm's defaults); `slurm-tuned`, the high-throughput settings of
bench/launch_throughput.py; `slurm-testbed`, the test bed's quick loop
(sched_interval=2, bf_interval=2, what this benchmark used before 2026-11-26). Needs
root and Debian's slurm packages with slurmrestd. A benchmark, not a test: results go
to bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu_use import idle_cpu, pct, rss_mb
from bench.embedded import (
    BIN,
    SLURM_DEFAULT_SCHEDULER,
    EmbeddedCluster,
    compile_podium,
    embedded_config,
    slurm_definition,
    slurm_pids,
    slurm_testbed,
    slurmrestd,
    slurmrestd_client,
)
from bench.launch_throughput import SLURM_TUNING
from bench.tables import scale_tables

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = embedded_config(cpus=64, gpus=8, interval_s=1)
SLURM = slurm_definition("scale", nodes=1, cpus=64, gpus=8)


def timed(argv: list[str], env: dict[str, str], cwd: Path, runs: int = 3) -> float:
    """The median wall time of a whole command (a new process each time)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class PodiumSide:
    name = "podium"

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster = cluster
        self.http = cluster.client(timeout=600)
        self.pid = int((cluster.home / "podiumd.pid").read_text())

    def body(self, options: list[str], wrap: str = "sleep 3600") -> dict[str, Any]:
        return {
            "wrap": wrap,
            "cwd": str(self.cluster.work),
            "options": ["-o", "/dev/null", *options],
            "environment": {"PATH": "/usr/bin:/bin"},
        }

    def submit(self, options: list[str], http: httpx.Client | None = None) -> list[int]:
        """One job through the REST API."""
        reply = (http or self.http).post("/v1/jobs", json=self.body(options))
        reply.raise_for_status()
        return [j["job_id"] for j in reply.json()["jobs"]]

    def api_client(self) -> httpx.Client:
        return self.cluster.client(timeout=600)

    def submit_cli(self, options: list[str]) -> None:
        argv = [str(BIN / "podium"), "submit", "-Q", "-o", "/dev/null", *options]
        subprocess.run([*argv, "--wrap", "sleep 3600"], env=self.env, cwd=self.work, check=True)

    def list_api(self) -> int:
        reply = self.http.get("/v1/jobs")
        reply.raise_for_status()
        return len(reply.json()["jobs"])

    def cluster_pids(self) -> list[int]:
        return [self.pid]  # its children (launcher, helpers, supervisors) are counted with it

    def pending(self) -> list[str]:
        jobs = self.http.get("/v1/jobs", params={"state": "PENDING"}).json()["jobs"]
        return [str(j["job_id"]) for j in jobs]

    def cancel(self, ids: list[str]) -> None:
        body = {"job_ids": [int(i) for i in ids]}
        self.http.post("/v1/jobs/cancel", json=body).raise_for_status()

    def command(self, *args: str) -> list[str]:
        return [str(BIN / "podium"), *args]

    @property
    def env(self) -> dict[str, str]:
        return self.cluster.env

    @property
    def work(self) -> Path:
        return self.cluster.work

    def ping_p99_ms(self, seconds: float = 10.0) -> float:
        """Ping every 10 ms while another client submits a job every 100 ms."""
        stop = threading.Event()

        def submitter() -> None:
            with self.cluster.client() as other:
                while not stop.is_set():
                    other.post("/v1/jobs", json=self.body(["--gpus=1", "--hold"]))
                    time.sleep(0.1)

        thread = threading.Thread(target=submitter, daemon=True)
        thread.start()
        latencies = []
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                t0 = time.perf_counter()
                self.http.get("/v1/ping").raise_for_status()
                latencies.append(1000 * (time.perf_counter() - t0))
                time.sleep(0.01)
        finally:
            stop.set()
            thread.join()
        return pct(latencies, 0.99)


class SlurmSide:
    name = "slurm"

    def __init__(self, directory: Path, rest: httpx.Client) -> None:
        self.env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        self.env.pop("SLURM_JWT", None)
        self.work = directory / "work"
        self.work.mkdir(exist_ok=True)
        self.directory = directory
        self.rest = rest
        self.pid = slurm_pids(directory)["slurmctld"][0]

    def submit(self, options: list[str], http: httpx.Client | None = None) -> list[int]:
        """One job through slurmrestd (`options` of the forms --gpus=N, --nice=N)."""
        job: dict[str, Any] = {
            "name": "scale",
            "current_working_directory": str(self.work),
            "environment": {"PATH": "/usr/bin:/bin"},
            "standard_output": "/dev/null",
        }
        for option in options:
            key, _, value = option.lstrip("-").partition("=")
            job[{"gpus": "gpus_per_node", "nice": "nice"}[key]] = (
                value if key == "gpus" else int(value)
            )
        body = {"script": "#!/bin/sh\nsleep 3600\n", "job": job}
        reply = (http or self.rest).post("/slurm/v0.0.38/job/submit", json=body)
        reply.raise_for_status()
        answer = reply.json()
        if answer.get("errors"):
            raise SystemExit(f"slurmrestd refused a job: {answer['errors']}")
        return [int(answer["job_id"])]

    def api_client(self) -> httpx.Client:
        return slurmrestd_client(self.directory)

    def list_api(self) -> int:
        reply = self.rest.get("/slurm/v0.0.38/jobs")
        reply.raise_for_status()
        return len(reply.json()["jobs"])

    def cluster_pids(self) -> list[int]:
        """slurmctld, the slurmd, munged and this cluster's slurmrestd."""
        return [pid for pids in slurm_pids(self.directory).values() for pid in pids]

    def submit_cli(self, options: list[str]) -> None:
        out = subprocess.run(
            ["sbatch", "--parsable", "-o", "/dev/null", *options, "--wrap", "sleep 3600"],
            env=self.env,
            cwd=self.work,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        int(out.strip().split(";")[0])

    def pending(self) -> list[str]:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-t", "PD", "-o", "%i"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.split()

    def cancel(self, ids: list[str]) -> None:
        for start in range(0, len(ids), 500):
            subprocess.run(["scancel", *ids[start : start + 500]], env=self.env, check=True)

    def command(self, *args: str) -> list[str]:
        # -r: one line per array task, as Podium lists them
        return ["squeue", "-r", *(a for a in args if a != "queue")]

    def ping_p99_ms(self, seconds: float = 10.0) -> float:
        return float("nan")  # slurmctld has no ping over the same kind of transport


def fill(side: PodiumSide | SlurmSide, pending: int, arrays: bool) -> float:
    """Fill the queue with `pending` jobs; submissions per second it took."""
    t0 = time.perf_counter()
    if arrays:
        for a in range(pending // 1000):
            side.submit_cli(["--gpus=1", "--array=0-999", f"--nice={a * 10}"])
        return pending / (time.perf_counter() - t0)

    def share(k: int) -> None:
        with side.api_client() as http:
            for n in range(k, pending, 2):
                side.submit(["--gpus=1", f"--nice={n % 50}"], http)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(share, range(2)))
    return pending / (time.perf_counter() - t0)


def measure(side: PodiumSide | SlurmSide, pending: int, arrays: bool) -> dict[str, Any]:
    for _ in range(8):
        side.submit(["--gpus=1"])
    fill_per_s = fill(side, pending, arrays)
    time.sleep(5)  # let the controller take it in
    cli_ms, api_ms = [], []
    for _ in range(30):
        t = time.perf_counter()
        side.submit_cli(["--gpus=1"])
        cli_ms.append(1000 * (time.perf_counter() - t))
        t = time.perf_counter()
        side.submit(["--gpus=1"])
        api_ms.append(1000 * (time.perf_counter() - t))
    out: dict[str, Any] = {
        "pending": len(side.pending()),
        "fill_per_s": round(fill_per_s, 1),
        "submit_cli_p50_ms": round(statistics.median(cli_ms), 1),
        "submit_api_p50_ms": round(statistics.median(api_ms), 1),
        "ping_p99_ms": round(side.ping_p99_ms(), 1),
    }
    time.sleep(3)
    out["queue_json_s"] = round(timed(side.command("queue", "--json"), side.env, side.work), 3)
    out["table_s"] = round(timed(side.command("queue"), side.env, side.work), 3)
    lists = []
    for _ in range(3):
        t = time.perf_counter()
        side.list_api()
        lists.append(time.perf_counter() - t)
    out["list_api_s"] = round(statistics.median(lists), 3)
    controller, cluster = idle_cpu(side.pid, side.cluster_pids())
    out["idle_controller_pct"], out["idle_cluster_pct"] = round(controller, 2), round(cluster, 2)
    out["rss_mb"] = round(rss_mb(side.pid), 1)
    extra = side.pending()[1000:]
    if extra:
        side.cancel(extra)
    time.sleep(5)
    out["pending_after_cancel"] = len(side.pending())
    out["table_1k_s"] = round(timed(side.command("queue"), side.env, side.work), 3)
    return out


SIDES = ("podium", "slurm-default", "slurm-tuned", "slurm-testbed")
SLURM_SETTINGS: dict[str, Mapping[str, str | None]] = {
    "slurm-default": SLURM_DEFAULT_SCHEDULER,
    "slurm-tuned": {**SLURM_TUNING, "MinJobAge": "300"},  # keep ended jobs as the others do
    "slurm-testbed": {},
}


@contextlib.contextmanager
def side_of(name: str) -> Iterator[PodiumSide | SlurmSide]:
    """A fresh cluster of side `name` (SIDES)."""
    if name == "podium":
        with EmbeddedCluster(EMBEDDED) as cluster:
            yield PodiumSide(cluster)
        return
    with (
        slurm_testbed(
            SLURM, 19820, "MaxJobCount=50000\n", settings=SLURM_SETTINGS[name]
        ) as directory,
        slurmrestd(directory) as rest,
    ):
        yield SlurmSide(directory, rest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--sides", default="podium,slurm-default,slurm-tuned")
    parser.add_argument("--arrays", action="store_true", help="fill with arrays of 1,000")
    args = parser.parse_args()
    sides = args.sides.split(",")
    for name in sides:
        if name not in SIDES:
            raise SystemExit(f"--sides: unknown side {name!r}; known: {', '.join(SIDES)}")
    compile_podium()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for run in range(args.runs):
        for name in sides:  # interleaved: each run measures every side back to back
            with side_of(name) as side:
                runs[name].append(measure(side, args.pending, args.arrays))
            print(f"run {run + 1} {name}", json.dumps(runs[name][-1]), flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    path = out / f"scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    record = {"args": vars(args), "slurm_settings": SLURM_SETTINGS, "runs": runs}
    print("\n".join(scale_tables(record)))  # docs/benchmarks.md's table
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"written to {path}")


if __name__ == "__main__":
    main()
