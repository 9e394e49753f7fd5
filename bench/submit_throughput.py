"""Submit throughput and submit-to-start latency on the embedded cluster.

    python bench/submit_throughput.py [--jobs 1000] [--modes api,cli]

For each mode, a fresh daemon (declared node: 64 CPUs, 8 GPUs) receives N trivial jobs
(`--wrap true`, 1 CPU each):
  api    one httpx client on the unix socket, one request per job, back to back; each
         job starts while the next ones are submitted;
  cli    a bash loop calling `podium submit --parsable --wrap true` once per job, as
         users script sbatch (a new process each time);
  queue  as api, but submitted held (pure accept rate: nothing starts), then all
         released at once: `start_rate_per_s` is how fast the daemon starts and
         finishes them (supervisor launch cost).
It reports submissions per second, then waits for every job to end and reports the
submit-to-start latency (p50, p99) from the accounting records, and the client
start-up cost of one `podium submit`. Results go to stdout and bench/results/.
This is a benchmark, not a test: run it by hand, numbers vary with the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from embedded import EmbeddedCluster, compile_podium

BIN = Path(sys.executable).parent
CONFIG = """\
node:
  name: bench0
  cpus: 64
  memory_mb: 64000
  gpus: {source: declared, count: 8, type: h100}
kill_wait_s: 5
scheduler_interval_s: 0.2
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Daemon(EmbeddedCluster):
    def __init__(self) -> None:
        super().__init__(CONFIG)


def submit_api(d: Daemon, n: int, held: bool = False) -> float:
    body = {
        "wrap": "true",
        "cwd": str(d.home / "work"),
        "environment": {"PATH": "/usr/bin:/bin"},
        "options": ["--output=/dev/null"] + (["--hold"] if held else []),
    }
    with d.client() as client:
        t0 = time.perf_counter()
        for _ in range(n):
            r = client.post("/v1/jobs", json=body)
            r.raise_for_status()
        return time.perf_counter() - t0


def submit_cli(d: Daemon, n: int) -> float:
    loop = (
        f"for i in $(seq {n}); do podium submit --parsable --output=/dev/null "
        f"--wrap true >/dev/null || exit 1; done"
    )
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", loop], env=d.env, cwd=d.home / "work", check=True)
    return time.perf_counter() - t0


def client_startup(d: Daemon, repeats: int = 20) -> float:
    """Median wall time of one `podium submit --test-only` (validates, queues nothing)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(
            [str(BIN / "podium"), "submit", "--test-only", "--wrap", "true"],
            env=d.env,
            cwd=d.home / "work",
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def drain(d: Daemon, n: int, timeout: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    with d.client() as client:
        while True:
            jobs: list[dict[str, Any]] = client.get("/v1/jobs", params={"all": "true"}).json()[
                "jobs"
            ]
            if sum(j["state"] == "COMPLETED" for j in jobs) >= n or time.monotonic() > deadline:
                return jobs
            time.sleep(0.5)


def release_all(d: Daemon) -> None:
    with d.client() as client:
        ids = [j["job_id"] for j in client.get("/v1/jobs").json()["jobs"]]
        client.post("/v1/jobs/release", json={"job_ids": ids}).raise_for_status()


def run_mode(mode: str, n: int) -> dict[str, Any]:
    with Daemon() as d:
        startup = client_startup(d) if mode == "cli" else None
        elapsed = submit_cli(d, n) if mode == "cli" else submit_api(d, n, held=mode == "queue")
        if mode == "queue":
            release_all(d)
        t_submitted = time.perf_counter()
        jobs = drain(d, n, timeout=max(600.0, n * 2.0))
        t_done = time.perf_counter()
    started = [j for j in jobs if j["start_time"]]
    latency = [j["start_epoch"] - j["submit_epoch"] for j in started]
    if mode == "queue":  # held on purpose: latency from submit means nothing
        latency = []
    return {
        "mode": mode,
        "jobs": n,
        "completed": sum(j["state"] == "COMPLETED" for j in jobs),
        "submit_s": round(elapsed, 3),
        "submits_per_s": round(n / elapsed, 1),
        "all_done_after_submit_s": round(t_done - t_submitted, 2),
        "start_rate_per_s": round(n / (t_done - t_submitted), 1) if mode == "queue" else None,
        "latency_p50_s": round(percentile(latency, 50), 3) if latency else None,
        "latency_p99_s": round(percentile(latency, 99), 3) if latency else None,
        "client_startup_s": round(startup, 4) if startup is not None else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--modes", default="api,cli,queue")
    args = parser.parse_args()
    compile_podium()
    results = [run_mode(m, args.jobs) for m in args.modes.split(",")]
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / f"submit-{stamp}.json").write_text(json.dumps(results, indent=2))
    keys = list(results[0])
    print(" | ".join(keys))
    for r in results:
        print(" | ".join(str(r[k]) for k in keys))
    by_mode = {r["mode"]: r for r in results}
    if "api" in by_mode and "cli" in by_mode:
        ratio = by_mode["api"]["submits_per_s"] / by_mode["cli"]["submits_per_s"]
        print(f"\nratio api/cli submits per second: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
