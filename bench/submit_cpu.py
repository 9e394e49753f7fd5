"""The daemon's CPU per CLI submission, for two checkouts side by side (before and
after a change), interleaved.

    python bench/submit_cpu.py --before /tmp/podium-before [--jobs 300] [--runs 3]

Each run starts a fresh embedded cluster (4 declared GPUs) from one checkout (its
`podium` package first on PYTHONPATH), submits JOBS held jobs one `podium submit`
process each, from a working directory, with `-o logs/%j.out` (so each submission's
output directory is checked as the user; the default `slurm-%j.out` in the submit
directory needs no check), and reads the daemon's CPU time
(its own and its children's: a `/bin/sh` per check and a long-lived helper count
alike) before and after.
Held jobs never start: only the submit path is measured. Reported per checkout:
milliseconds of daemon CPU per submission, min / median / max over the runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.embedded import BIN, EmbeddedCluster, compile_podium, embedded_config

ROOT = Path(__file__).resolve().parents[1]


def daemon_cpu(home: Path) -> float:
    """Seconds of CPU the daemon of `home` used so far, with its children's: those it
    waited for and those still running (a long-lived helper)."""
    pid = int((home / "podiumd.pid").read_text().split()[0])
    daemon = psutil.Process(pid)
    t = daemon.cpu_times()
    used = t.user + t.system + t.children_user + t.children_system
    for child in daemon.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            c = child.cpu_times()
            used += c.user + c.system
    return float(used)


def one_run(tree: Path, jobs: int) -> float:
    """Milliseconds of daemon CPU per submission with the checkout at `tree`."""
    cluster = EmbeddedCluster(embedded_config(cpus=8, gpus=4))
    cluster.env["PYTHONPATH"] = str(tree)  # its daemon and clients run this checkout
    env = cluster.env
    with cluster:
        (cluster.work / "logs").mkdir()
        argv = [str(BIN / "podium"), "submit", "-Q", "--hold", "-o", "logs/%j.out",
                "--wrap", "true"]  # fmt: skip
        subprocess.run(argv, env=env, check=True, cwd=cluster.work)  # warm
        before = daemon_cpu(cluster.home)
        for _ in range(jobs):
            subprocess.run(argv, env=env, check=True, cwd=cluster.work)
        return (daemon_cpu(cluster.home) - before) / jobs * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout")
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compile_podium()
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(args.before / "podium")])
    trees = {"before": args.before.resolve(), "after": ROOT}
    got: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.runs):
        for name, tree in trees.items():
            got[name].append(one_run(tree, args.jobs))
            print(name, f"{got[name][-1]:.2f} ms", flush=True)
    for name, values in got.items():
        low, mid, high = min(values), statistics.median(values), max(values)
        print(f"{name}: daemon CPU per submission {low:.2f} / {mid:.2f} / {high:.2f} ms "
              "(min / median / max)")  # fmt: skip
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "submit_cpu.json").write_text(json.dumps(got, indent=2))


if __name__ == "__main__":
    main()
