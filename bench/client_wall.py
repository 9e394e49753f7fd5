"""Wall time of one client command at a time on the embedded cluster, beside a bare
interpreter's start in the same run.

    python bench/client_wall.py [--calls 30]

A fresh daemon (one node, 64 CPUs). Each command runs CALLS times back to back; p50
and p90 of the wall time are reported: `python -c pass`; `podium submit --wrap true`
held (no start competing for the CPU) and starting; the Slurm-compatible `sbatch`
shim (`podium slurm-commands install`); then, with 1,000 pending jobs, `podium queue`,
`podium queue --json` and the `squeue` shim. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.embedded import BIN, EmbeddedCluster, compile_podium, embedded_config


def timed(argv: list[str], calls: int, cluster: EmbeddedCluster) -> dict[str, float]:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        subprocess.run(
            argv, env=cluster.env, cwd=cluster.work, stdout=subprocess.DEVNULL, check=True
        )
        times.append(time.perf_counter() - t0)
    times.sort()
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p90_ms": 1000 * times[int(0.9 * len(times))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    compile_podium()
    podium = str(BIN / "podium")
    out: dict[str, dict[str, float]] = {}
    with EmbeddedCluster(embedded_config(cpus=64, gpus=8, interval_s=0.5)) as cluster:
        tools = cluster.home / "slurm-bin"
        install = [podium, "slurm-commands", "install", str(tools)]
        subprocess.run(install, env=cluster.env, check=True, capture_output=True)
        out["python -c pass"] = timed([sys.executable, "-c", "pass"], args.calls, cluster)
        out["podium submit -H --wrap true"] = timed(
            [podium, "submit", "-H", "-o", "/dev/null", "--wrap", "true"], args.calls, cluster
        )
        out["podium submit --wrap true"] = timed(
            [podium, "submit", "-o", "/dev/null", "--wrap", "true"], args.calls, cluster
        )
        out["sbatch -H --wrap true (shim)"] = timed(
            [str(tools / "sbatch"), "-H", "-o", "/dev/null", "--wrap", "true"], args.calls, cluster
        )
        with cluster.client() as http:
            http.post("/v1/jobs/cancel", json={"states": ["PENDING", "RUNNING"]})
        fill = [podium, "submit", "-H", "--array=0-999", "--wrap", "true"]
        subprocess.run(fill, env=cluster.env, cwd=cluster.work, check=True, capture_output=True)
        out["podium queue (1,000 jobs)"] = timed([podium, "queue"], args.calls, cluster)
        out["podium queue --json (1,000 jobs)"] = timed(
            [podium, "queue", "--json"], args.calls, cluster
        )
        out["squeue (shim, 1,000 jobs)"] = timed([str(tools / "squeue")], args.calls, cluster)
    for name, figures in out.items():
        print(f"{name:36} p50 {figures['p50_ms']:6.1f} ms  p90 {figures['p90_ms']:6.1f} ms")
    results = Path(__file__).resolve().parent / "results"
    results.mkdir(exist_ok=True)
    (results / f"client-wall-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
        json.dumps(out, indent=1)
    )


if __name__ == "__main__":
    main()
