"""Accepting job arrays of growing size: Podium beside a real Slurm 22.05, in one run.

    python bench/array_accept.py [--sizes 10,1000,100000] [--runs 5] [--sides podium,slurm]

Each side gets one node whose GPUs are all held by a running job, so nothing starts,
and MaxArraySize (Podium's max_array_size) above the largest size. Per size, over RUNS
submissions of a held array of one-GPU `true` tasks through each side's CLI
(`podium submit` / `sbatch`), the median of: the whole submit command, and the
listing right after (`podium queue --json` / `squeue --json`, one record for the
pending array on both sides). Both keep a pending array as one record, so submitting
should not grow with the array's size. Slurm's side needs root and Debian's slurm
packages. A benchmark, not a test: results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
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

ROOT = Path(__file__).resolve().parents[1]


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """Seconds one command takes, start to exit (it must succeed)."""
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}...: {done.stderr.strip()}")
    return took


def measure(
    submit: list[str], listing: list[str], sizes: list[int], runs: int, env: dict[str, str],
    cwd: Path,
) -> dict[str, dict[str, float]]:  # fmt: skip
    out = {}
    for size in sizes:
        times, lists = [], []
        for _ in range(runs):
            argv = [*submit, "-H", f"--array=0-{size - 1}", "-G", "1", "-o", "/dev/null"]
            times.append(timed([*argv, "--wrap", "true"], env, cwd))
            lists.append(timed(listing, env, cwd))
        out[str(size)] = {
            "submit_s": statistics.median(times),
            "list_s": statistics.median(lists),
        }
        print(size, out[str(size)], flush=True)
    return out


def run_podium(sizes: list[int], runs: int) -> dict[str, Any]:
    config = embedded_config(cpus=8, gpus=1) + f"max_array_size: {max(sizes) + 1}\n"
    with EmbeddedCluster(config) as cluster:
        podium = str(BIN / "podium")
        subprocess.run(
            [podium, "submit", "-G", "1", "-o", "/dev/null", "--wrap", "sleep 3600"],
            env=cluster.env, cwd=cluster.work, check=True, capture_output=True,
        )  # fmt: skip
        return measure(
            [podium, "submit", "-Q"], [podium, "queue", "--json"], sizes, runs, cluster.env,
            cluster.work,
        )  # fmt: skip


def run_slurm(sizes: list[int], runs: int) -> dict[str, Any]:
    definition = slurm_definition("arrays", nodes=1, cpus=8, gpus=1)
    # slurmctld refuses an array whose tasks would not all fit under MaxJobCount
    count = str(max(1_000_000, 2 * runs * sum(sizes)))
    settings = {"MaxArraySize": str(max(sizes) + 1), "MaxJobCount": count}
    with slurm_testbed(definition, 19950, settings=settings) as directory:
        env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        work = directory / "work"
        work.mkdir(exist_ok=True)
        subprocess.run(
            ["sbatch", "-G", "1", "-o", "/dev/null", "--wrap", "sleep 3600"],
            env=env, cwd=work, check=True, capture_output=True,
        )  # fmt: skip
        return measure(["sbatch", "-Q"], ["squeue", "--json"], sizes, runs, env, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sides", default="podium,slurm")
    args = parser.parse_args()
    compile_podium()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {}
    for side in args.sides.split(","):
        results[side] = (run_podium if side == "podium" else run_slurm)(sizes, args.runs)
    if len(results) == 2:
        print(f"{'tasks':>8}{'podium submit':>15}{'slurm submit':>14}{'ratio':>7}")
        for size in map(str, sizes):
            a, b = results["podium"][size]["submit_s"], results["slurm"][size]["submit_s"]
            print(f"{size:>8}{a:15.3f}{b:14.3f}{a / b:7.2f}")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    path = out / f"array-accept-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"args": vars(args), **results}, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
