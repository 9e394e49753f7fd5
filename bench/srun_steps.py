"""srun's speed on Podium's embedded cluster and on a real Slurm 22.05 cluster, side by
side on one machine (issue 12, item 9).

    python bench/srun_steps.py [--steps 30] [--calls 20]

1. A trivial 4-task step inside a running job: the job's script runs `srun -n 4 date
   +%s%N` STEPS times, back to back, and reports the time from the srun call until
   the last of its 4 tasks started (the time it printed), and until srun returned.
2. `srun -G 1 hostname` from outside a job, with a free GPU: an allocation, one step,
   the release; CALLS times, back to back, timed around the command.

The Slurm side is rendered by `podium slurm render --testbed` and started by
scripts/slurm-testbed/up.sh (needs root and Debian's slurm packages). The two run one
after the other, never at once. Reported: p50, p90 and the ratio Podium / Slurm.
Results go to bench/results/srun_steps.json.
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
from collections.abc import Callable
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
COMPAT_BIN = ROOT / "podium" / "slurm_commands" / "bin"
EMBEDDED = embedded_config(cpus=16, gpus=8)
SLURM = slurm_definition("bench", nodes=1, cpus=16, gpus=8)
# Run inside the job: STEPS x `srun -n 4 date +%s%N`; for each, the seconds until the
# last of the 4 tasks started (the time it printed) and until srun returned, as JSON.
STEP_TIMER = """\
import json, subprocess, sys, time
starts, calls = [], []
for _ in range({steps}):
    t = time.time_ns()
    out = subprocess.run(["srun", "-n", "4", "date", "+%s%N"], check=True,
                         capture_output=True, text=True).stdout.split()
    calls.append((time.time_ns() - t) / 1e9)
    starts.append((max(map(int, out)) - t) / 1e9)
print(json.dumps({{"start": starts, "call": calls}}))
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_s": pct(values, 0.5), "p90_s": pct(values, 0.9), "mean_s": statistics.mean(values)}


def step_times(submit: Callable[[Path], None], work: Path, steps: int) -> dict[str, list[float]]:
    """Submit the timing job (one node, 4 tasks) and read what it printed."""
    timer = work / "step_timer.py"
    timer.write_text(STEP_TIMER.format(steps=steps))
    out = work / "steps.out"
    out.unlink(missing_ok=True)
    script = work / "steps.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH -n 4 -o {out}\nexec {sys.executable} {timer}\n")
    submit(script)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().strip().startswith("{"):
            text = out.read_text().strip().splitlines()[-1]
            values: dict[str, list[float]] = json.loads(text)
            return values
        time.sleep(0.2)
    raise SystemExit(f"the step timer never finished: {out.read_text() if out.exists() else ''}")


def call_times(argv: list[str], env: dict[str, str], cwd: Path, calls: int) -> list[float]:
    """Time `argv` (an srun from outside a job) CALLS times."""
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True)
        out.append(time.perf_counter() - t)
    return out


def run_podium(steps: int, calls: int) -> dict[str, Any]:
    with EmbeddedCluster(EMBEDDED) as cluster:
        env = dict(cluster.env, PODIUM_PYTHON=sys.executable)
        env["PATH"] = f"{COMPAT_BIN}:{env['PATH']}"

        def submit(script: Path) -> None:
            subprocess.run([str(BIN / "podium"), "submit", "-Q", str(script)], env=env,
                           check=True, cwd=cluster.work)  # fmt: skip

        inside = step_times(submit, cluster.work, steps)
        outside = call_times(["srun", "-G", "1", "hostname"], env, cluster.work, calls)
    return {
        "step_4_tasks_started": summary(inside["start"]),
        "step_4_tasks_returned": summary(inside["call"]),
        "srun_hostname": summary(outside),
    }


def run_slurm(steps: int, calls: int) -> dict[str, Any]:
    with slurm_testbed(SLURM, 19900) as directory:
        env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        env.pop("SLURM_JWT", None)
        work = directory / "work"
        work.mkdir(exist_ok=True)

        def submit(script: Path) -> None:
            subprocess.run(["sbatch", "-Q", str(script)], env=env, check=True, cwd=work)

        inside = step_times(submit, work, steps)
        outside = call_times(["srun", "-G", "1", "hostname"], env, work, calls)
    return {
        "step_4_tasks_started": summary(inside["start"]),
        "step_4_tasks_returned": summary(inside["call"]),
        "srun_hostname": summary(outside),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    if os.geteuid() != 0 or shutil.which("slurmctld") is None:
        raise SystemExit("needs root and Slurm (scripts/slurm-testbed/install.sh)")
    compile_podium()  # else each srun may compile its modules again (+20 ms here)
    results = {"podium": run_podium(args.steps, args.calls)}
    results["slurm"] = run_slurm(args.steps, args.calls)
    print(f"{'':40}{'podium':>10}{'slurm':>10}{'ratio':>8}")
    for part in ("step_4_tasks_started", "step_4_tasks_returned", "srun_hostname"):
        for key in ("p50_s", "p90_s"):
            p, s = results["podium"][part][key], results["slurm"][part][key]
            print(f"{part + ' ' + key:40}{p:10.3f}{s:10.3f}{p / s:8.2f}")
    out = ROOT / "bench" / "results" / "srun_steps.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
