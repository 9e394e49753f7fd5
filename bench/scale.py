"""The embedded daemon with 10,000 pending jobs, beside slurmctld with the same queue.

    python bench/scale.py [--pending 10000] [--sides podium,slurm] [--arrays]

Both sides get one node of 8 declared GPUs kept busy by 8 one-GPU `sleep` jobs, then
PENDING more one-GPU jobs that cannot start, each submitted on its own (with --arrays:
arrays of 1,000 tasks, quicker to fill; slurmctld then keeps an array as one record
until its tasks start, so compare Slurm with single jobs), with varied nice values.
Measured with the queue full (medians of several runs each):
  submit_p50_ms     one more single job through the API (Podium) / sbatch (Slurm);
  ping_p99_ms       Podium: GET /v1/ping every 10 ms while a job is submitted every
                    100 ms (each submit prompts a scheduling pass);
  queue_json_s      `podium queue --json` / `squeue --json`, the whole command;
  table_s           `podium queue` / `squeue`, the whole command;
  table_1k_s        the same with 1,000 jobs in the queue (the rest cancelled);
  idle_cpu_pct      the daemon's CPU over 20 s with nothing happening (% of one core);
  rss_mb            the daemon's (slurmctld's) resident memory.
Slurm's side needs root and Debian's slurm packages (scripts/slurm-testbed). This is a
benchmark, not a test: numbers vary with the machine. Results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
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

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = embedded_config(cpus=64, gpus=8, interval_s=1)
SLURM = slurm_definition("scale", nodes=1, cpus=64, gpus=8)
TICKS = os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(argv: list[str], env: dict[str, str], cwd: Path, runs: int = 3) -> float:
    """The median wall time of a whole command (a new process each time)."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def idle_cpu(pid: int, seconds: float = 20.0) -> float:
    before = cpu_seconds(pid)
    time.sleep(seconds)
    return 100.0 * (cpu_seconds(pid) - before) / seconds


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

    def submit(self, options: list[str]) -> list[int]:
        reply = self.http.post("/v1/jobs", json=self.body(options))
        reply.raise_for_status()
        return [j["job_id"] for j in reply.json()["jobs"]]

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

    def __init__(self, directory: Path) -> None:
        self.env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        self.env.pop("SLURM_JWT", None)
        self.work = directory / "work"
        self.work.mkdir(exist_ok=True)
        self.pid = int((directory / "run" / "slurmctld.pid").read_text())

    def submit(self, options: list[str]) -> list[int]:
        out = subprocess.run(
            ["sbatch", "--parsable", "-o", "/dev/null", *options, "--wrap", "sleep 3600"],
            env=self.env,
            cwd=self.work,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return [int(out.strip().split(";")[0])]

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


def measure(side: PodiumSide | SlurmSide, pending: int, arrays: bool) -> dict[str, Any]:
    for _ in range(8):
        side.submit(["--gpus=1"])
    arrays, singles = divmod(pending, 1000) if arrays else (0, pending)
    t0 = time.perf_counter()
    for a in range(arrays):
        side.submit(["--gpus=1", "--array=0-999", f"--nice={a * 10}"])
    for s in range(singles):
        side.submit(["--gpus=1", f"--nice={s % 50}"])
    fill_s = time.perf_counter() - t0
    time.sleep(5)  # let the daemon take it in
    submit_ms = []
    for _ in range(30):
        t = time.perf_counter()
        side.submit(["--gpus=1"])
        submit_ms.append(1000 * (time.perf_counter() - t))
    out: dict[str, Any] = {
        "pending": len(side.pending()),
        "fill_s": round(fill_s, 1),
        "submit_p50_ms": round(statistics.median(submit_ms), 1),
        "ping_p99_ms": round(side.ping_p99_ms(), 1),
    }
    time.sleep(3)
    out["queue_json_s"] = round(timed(side.command("queue", "--json"), side.env, side.work), 3)
    out["table_s"] = round(timed(side.command("queue"), side.env, side.work), 3)
    out["idle_cpu_pct"] = round(idle_cpu(side.pid), 2)
    out["rss_mb"] = round(rss_mb(side.pid), 1)
    side.cancel(side.pending()[1000:])
    time.sleep(5)
    out["pending_after_cancel"] = len(side.pending())
    out["table_1k_s"] = round(timed(side.command("queue"), side.env, side.work), 3)
    return out


def run_podium(pending: int, arrays: bool) -> dict[str, Any]:
    with EmbeddedCluster(EMBEDDED) as cluster:
        return measure(PodiumSide(cluster), pending, arrays)


def run_slurm(pending: int, arrays: bool) -> dict[str, Any]:
    with slurm_testbed(SLURM, 19820, "MaxJobCount=50000\n") as directory:
        return measure(SlurmSide(directory), pending, arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--sides", default="podium,slurm")
    parser.add_argument("--arrays", action="store_true", help="fill with arrays of 1,000")
    args = parser.parse_args()
    compile_podium()
    results: dict[str, Any] = {"pending": args.pending, "arrays": args.arrays}
    for name in args.sides.split(","):
        run = run_podium if name == "podium" else run_slurm
        results[name] = run(args.pending, args.arrays)
        print(name, json.dumps(results[name]), flush=True)
    out = ROOT / "bench" / "results" / f"scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
