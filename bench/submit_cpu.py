"""The daemon's CPU per CLI submission, for two checkouts side by side (before and
after a change), interleaved.

    python bench/submit_cpu.py --before /tmp/podium-before [--jobs 300] [--runs 3]
                               [--clients 1]

Each run starts a fresh embedded cluster (4 declared GPUs) from one checkout (its
`podium` package first on PYTHONPATH), submits JOBS held jobs one `podium submit`
process each, from a working directory, with `-o logs/%j.out` (so each submission's
output directory is checked as the user; the default `slurm-%j.out` in the submit
directory needs no check), and reads the daemon's CPU time
(its own and its children's: a `/bin/sh` per check and a long-lived helper count
alike) before and after.
Held jobs never start: only the submit path is measured. With `--clients N`, N
threads each run their share of the `podium submit` processes at once (as several
users or a script's parallel loop would), which is where concurrent submissions can
share a commit's flush. Reported per checkout: milliseconds of daemon CPU per
submission and submissions per second, min / median / max over the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu_use import group_cpu_seconds
from bench.embedded import BIN, EmbeddedCluster, compile_podium, embedded_config
from bench.tables import spread

ROOT = Path(__file__).resolve().parents[1]


def daemon_cpu(home: Path) -> float:
    """Seconds of CPU the daemon of `home` used so far, with its children's: those it
    waited for and those still running (a long-lived helper)."""
    return group_cpu_seconds([int((home / "podiumd.pid").read_text().split()[0])])


def one_run(tree: Path, jobs: int, clients: int) -> tuple[float, float]:
    """Milliseconds of daemon CPU per submission with the checkout at `tree`, and
    submissions per second, with `clients` submitting at once."""
    cluster = EmbeddedCluster(embedded_config(cpus=8, gpus=4))
    cluster.env["PYTHONPATH"] = str(tree)  # its daemon and clients run this checkout
    env = cluster.env
    with cluster:
        (cluster.work / "logs").mkdir()
        argv = [str(BIN / "podium"), "submit", "-Q", "--hold", "-o", "logs/%j.out",
                "--wrap", "true"]  # fmt: skip
        subprocess.run(argv, env=env, check=True, cwd=cluster.work)  # warm
        before, began = daemon_cpu(cluster.home), time.perf_counter()

        def submit_share(share: int) -> None:
            for _ in range(share):
                subprocess.run(argv, env=env, check=True, cwd=cluster.work)

        shares = [jobs // clients + (i < jobs % clients) for i in range(clients)]
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(submit_share, shares))
        wall = time.perf_counter() - began
        return (daemon_cpu(cluster.home) - before) / jobs * 1000, jobs / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=1)
    args = parser.parse_args()
    compile_podium()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.before / "podium")])
    trees = {"before": args.before.resolve(), "after": ROOT}
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    rate: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            ms, per_s = one_run(tree, args.jobs, args.clients)
            cpu[name].append(ms)
            rate[name].append(per_s)
            print(name, f"{ms:.2f} ms, {per_s:.1f} submissions/s", flush=True)
    for name in trees:
        print(f"{name} ({args.clients} clients): daemon CPU per submission "
              f"{spread(cpu[name], 2)} ms, submissions/s {spread(rate[name], 1)} "
              "(min / median / max)")  # fmt: skip
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    record = {"clients": args.clients, "jobs": args.jobs, "cpu_ms": cpu, "per_s": rate}
    (out / f"submit_cpu-{args.clients}c.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
