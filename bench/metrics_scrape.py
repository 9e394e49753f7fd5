"""What a Prometheus scrape of /metrics costs the daemon, with 10,000 jobs in the queue
and 64 declared GPUs, and whether scrapes hold up the scheduler.

    python bench/metrics_scrape.py [--pending 10000] [--gpus 64] [--scrapes 20] [--rounds 3]

One daemon (64 declared H100s, 128 CPUs) with 32 running 2-GPU jobs and PENDING held
jobs, listening on loopback. Each round, interleaved:
  quiet      a job is submitted every 0.5 s for 10 s; the passes' lengths are read
             from slurm_schedule_cycle_* (sdiag's counters) before and after;
  scraping   the same while a client scrapes /metrics back to back.
Reported (min / median / max over rounds): the scrape's wall time and bytes, the
daemon's CPU per scrape, and the mean pass length in both modes, so a scrape that
held up passes shows as longer passes. This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu_use import cpu_seconds
from bench.embedded import EmbeddedCluster, embedded_config

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sample(text: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(found[1]) if found else float("nan")


def passes(http: httpx.Client) -> tuple[float, float]:
    text = http.get("/metrics").text
    return sample(text, "slurm_schedule_cycle_cnt"), sample(text, "slurm_schedule_cycle_tot")


def window(cluster: EmbeddedCluster, http: httpx.Client, scrape: bool) -> dict[str, float]:
    """10 s of a submit every 0.5 s, with or without back-to-back scrapes."""
    pid = int((cluster.home / "podiumd.pid").read_text())
    stop = threading.Event()
    scrapes: list[tuple[float, int]] = []

    def scraper() -> None:
        with httpx.Client(base_url=str(http.base_url), timeout=60) as own:
            while not stop.is_set():
                t0 = time.perf_counter()
                body = own.get("/metrics").content
                scrapes.append((time.perf_counter() - t0, len(body)))

    count0, total0 = passes(http)
    cpu0 = cpu_seconds(pid)
    thread = threading.Thread(target=scraper) if scrape else None
    if thread:
        thread.start()
    with cluster.client() as api:
        for _ in range(20):
            api.post("/v1/jobs", json={"wrap": "true", "cwd": str(cluster.work),
                                       "options": ["--hold", "-o", "/dev/null"]})  # fmt: skip
            time.sleep(0.5)
    stop.set()
    if thread:
        thread.join()
    cpu = cpu_seconds(pid) - cpu0
    count1, total1 = passes(http)
    made = max(1.0, count1 - count0)
    out = {"pass_ms": (total1 - total0) / made / 1000, "passes": count1 - count0, "cpu_s": cpu}
    if scrapes:
        out.update(
            scrape_s=statistics.median(s for s, _ in scrapes),
            scrapes=len(scrapes),
            bytes=statistics.median(b for _, b in scrapes),
            cpu_per_scrape_ms=1000 * cpu / len(scrapes),
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    config = embedded_config(cpus=128, gpus=args.gpus, interval_s=1)
    config += f"http: {{listen: '127.0.0.1:{port}'}}\n"
    with EmbeddedCluster(config, prefix="podium-bench-metrics-") as cluster:
        with cluster.client(timeout=600) as api:
            for _ in range(args.gpus // 2):
                api.post("/v1/jobs", json={"wrap": "sleep 3600", "cwd": str(cluster.work),
                                           "options": ["--gpus=2", "-o", "/dev/null"]})  # fmt: skip
            for start in range(0, args.pending, 5000):
                jobs = [{"wrap": "true", "cwd": str(cluster.work),
                         "options": ["--hold", "-o", "/dev/null", f"--nice={i % 100}"]}
                        for i in range(start, min(args.pending, start + 5000))]  # fmt: skip
                made = api.post("/v1/jobs/batch", json={"jobs": jobs})
                made.raise_for_status()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as http:
            results: dict[str, list[dict[str, float]]] = {"quiet": [], "scraping": []}
            for _ in range(args.rounds):
                for mode in ("quiet", "scraping"):
                    results[mode].append(window(cluster, http, mode == "scraping"))
                    print(mode, json.dumps(results[mode][-1]), flush=True)

    def spread(mode: str, key: str) -> str:
        values = sorted(r[key] for r in results[mode])
        return f"{values[0]:.3g} / {statistics.median(values):.3g} / {values[-1]:.3g}"

    print(f"\n{args.pending} held jobs + {args.gpus // 2} running, {args.gpus} declared GPUs")
    print("scrape wall s (min/median/max):", spread("scraping", "scrape_s"))
    print("scrape bytes:", spread("scraping", "bytes"))
    print("daemon CPU per scrape ms:", spread("scraping", "cpu_per_scrape_ms"))
    print("mean pass ms, quiet:", spread("quiet", "pass_ms"))
    print("mean pass ms, scraping:", spread("scraping", "pass_ms"))
    out = ROOT / "bench" / "results" / "metrics_scrape.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
