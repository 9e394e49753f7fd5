"""Does the simulator tell the truth? The Tiresias 60-job trace replayed for real on
the embedded cluster (16 declared GPUs, `sleep` jobs) beside `podium sim` of the same
trace on the same node, same policy, same time limits.

    python bench/sim_vs_real.py [--compress 60] [--runs 3]
    python bench/sim_vs_real.py --order las [--las-limit 4000] [--min-run 7200]
        [--starve 0.5] [--compress 30]   (the daemon's defaults)

Real: job j is `sleep DURATION/COMPRESS` submitted at SUBMIT/COMPRESS with the time
limit DURATION/COMPRESS + 1 s (what backfill plans with; the second keeps the limit
from killing a job that is about to end), through `podium submit`, one process each.
Simulated: the same jobs with the same limits (times COMPRESS), through the daemon's
own policy (`policy_from_config` of the same cluster config), a pass after every event.
Average JCT in trace seconds (real times COMPRESS), min / median / max over the runs.

With `--order las` the cluster orders by least attained service (`scheduler.order:
las`, its limit in trace GPU-seconds and its minimum run in trace seconds, both
divided by COMPRESS for the real cluster) and each job is bench/resumable_sleep.py:
it saves on SIGTERM and resumes where it stopped. Each preemption's real cost is
measured (the signal to the requeue: the save; the start to the job's work: the
restart), and the simulator charges the median of each (times COMPRESS) as
--save-time and --restart-cost, after the first run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.embedded import BIN, EmbeddedCluster, compile_podium, embedded_config
from podium.config.cluster import parse_config
from podium.sched.config_policy import policy_from_config
from podium.sim import engine
from podium.sim.engine import SimOptions, simulate, uniform_nodes
from podium.sim.metrics import summarize
from podium.sim.traces import TraceJob, read_tiresias

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "traces" / "tiresias_60_job.csv"
CONFIG = embedded_config(cpus=64, gpus=16)
RESUMABLE = ROOT / "bench" / "resumable_sleep.py"


@dataclass
class RealRun:
    """One real replay: its average JCT (trace seconds), its preemptions, and each
    preemption's save and restart in real seconds."""

    avg_jct: float
    preemptions: int = 0
    saves: list[float] = field(default_factory=list)
    restarts: list[float] = field(default_factory=list)


def real(jobs: list[TraceJob], compress: float, config: str, las: bool) -> RealRun:
    """One real replay."""
    with EmbeddedCluster(config) as cluster:
        http = cluster.client()
        t0 = time.time()
        for job in jobs:
            delay = t0 + job.submit_time / compress - time.time()
            if delay > 0:
                time.sleep(delay)
            seconds = job.duration / compress
            work = f"sleep {seconds:.2f}"
            if las:
                state = cluster.work / f"state-{job.job_id}"
                work = f"exec {sys.executable} {RESUMABLE} {seconds:.3f} {state} {BIN / 'podium'}"
            argv = [str(BIN / "podium"), "submit", "-Q", "-o", "/dev/null", f"--gpus={job.gpus}",
                    "-J", str(job.job_id), "-t", _limit(seconds + 1), "--wrap", work]  # fmt: skip
            subprocess.run(argv, env=cluster.env, check=True, cwd=cluster.work)
        deadline = time.monotonic() + 1800
        while True:
            done = http.get("/v1/jobs", params={"all": "true"}).json()["jobs"]
            if len(done) >= len(jobs) and all(j["end_epoch"] for j in done):
                break
            assert time.monotonic() < deadline, "the replay did not finish"
            time.sleep(0.5)
        jct = [j["end_epoch"] - j["submit_epoch"] for j in done]
        got = RealRun(float(statistics.mean(jct)) * compress)
        for j in done:
            if not j["restart_count"]:
                continue
            got.preemptions += j["restart_count"]
            events = http.get(f"/v1/jobs/{j['job_id']}").json()["events"]
            _costs(events, cluster.work / f"state-{j['name']}.log", got)
        return got


def _costs(events: list[dict[str, Any]], log: Path, into: RealRun) -> None:
    """A preempted job's saves (its `term` to the requeue) and restarts (a later start
    to its `began`), in real seconds."""
    try:
        lines = [line.split() for line in log.read_text().splitlines()]
    except FileNotFoundError:
        return
    terms = [float(t) for kind, t in lines if kind == "term"]
    began = [float(t) for kind, t in lines if kind == "began"]
    requeued = [e["time"] for e in events if e["kind"] == "requeue"]
    starts = [e["time"] for e in events if e["kind"] == "start"]
    into.saves += [r - t for t, r in zip(terms, requeued, strict=False)]
    into.restarts += [b - s for s, b in zip(starts[1:], began[1:], strict=False)]


def _limit(seconds: float) -> str:
    """A time limit of whole seconds as `-t` takes it (MM:SS)."""
    total = int(seconds + 0.999)
    return f"{total // 60}:{total % 60:02d}"


def simulated(
    jobs: list[TraceJob], compress: float, config: str, save_s: float = 0.0,
    restart_s: float = 0.0,
) -> tuple[float, int]:  # fmt: skip
    """Average JCT and preemptions of the same jobs and limits in the simulator, the
    daemon's policy (with least attained service, each preemption charged `save_s`
    and `restart_s` trace seconds)."""
    limited = [replace(j, time_limit=(j.duration / compress + 1) * compress) for j in jobs]
    policy = policy_from_config(parse_config(config, "bench"))
    if policy.las is not None:  # the config's limits are in real time: back to trace time
        rules = policy.las
        policy = replace(policy, las=replace(
            rules, queue_limits_gpu_s=tuple(x * compress for x in rules.queue_limits_gpu_s),
            min_run_s=rules.min_run_s * compress,
        ))  # fmt: skip
    engine.POLICIES["daemon"] = policy
    options = SimOptions(save_s=save_s, restart_cost_s=restart_s)
    result = simulate(limited, uniform_nodes(1, 16, 64, 64000), "daemon", options)
    return float(summarize(result)["avg_jct_s"]), result.preemptions


def las_config(compress: float, limit: float, min_run: float, starve: float | None) -> str:
    """CONFIG ordered by least attained service, its limit and minimum run given in
    trace units (divided by `compress` for the real cluster)."""
    run_s = max(1, round(min_run / compress))
    return CONFIG + (
        f"scheduler:\n  order: las\n  las: {{queue_limits: [{limit / compress:.3f}], "
        f'min_run: "{run_s // 60}:{run_s % 60:02d}", '
        f"starve_factor: {'null' if starve is None else starve}}}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compress", type=float, default=60.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--order", choices=("multifactor", "las"), default="multifactor")
    parser.add_argument("--las-limit", type=float, default=4000.0, help="trace GPU-seconds")
    parser.add_argument("--min-run", type=float, default=7200.0, help="trace seconds")
    parser.add_argument("--starve", type=float, default=0.5)
    args = parser.parse_args()
    compile_podium()
    jobs = sorted(read_tiresias(TRACE), key=lambda j: j.submit_time)
    las = args.order == "las"
    config = (
        las_config(args.compress, args.las_limit, args.min_run, args.starve)
        if las
        else CONFIG + "scheduler: {order: multifactor}\n"
    )
    runs: list[RealRun] = []
    for _ in range(args.runs):
        runs.append(real(jobs, args.compress, config, las))
        r = runs[-1]
        print(f"real avg JCT {r.avg_jct:.1f} s, {r.preemptions} preemptions", flush=True)
    saves = [s for r in runs for s in r.saves]
    restarts = [s for r in runs for s in r.restarts]
    save_s = statistics.median(saves) * args.compress if saves else 0.0
    restart_s = statistics.median(restarts) * args.compress if restarts else 0.0
    if saves or restarts:
        print(f"measured per preemption (real s): save {_spread(saves)}, "
              f"restart {_spread(restarts)}")  # fmt: skip
    sim, sim_preempts = simulated(jobs, args.compress, config, save_s, restart_s)
    bare, _ = simulated(jobs, args.compress, config)
    avg = [r.avg_jct for r in runs]
    mid = statistics.median(avg)
    print(f"simulated {sim:.1f} s with {sim_preempts} preemptions (charged save {save_s:.1f} "
          f"s, restart {restart_s:.1f} s; {bare:.1f} s uncharged); real {min(avg):.1f} / "
          f"{mid:.1f} / {max(avg):.1f} s (min / median / max), preemptions "
          f"{_spread([float(r.preemptions) for r in runs])}; real / simulated "
          f"{mid / sim:.3f}")  # fmt: skip


def _spread(values: list[float]) -> str:
    """min / median / max."""
    if not values:
        return "none"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


if __name__ == "__main__":
    main()
