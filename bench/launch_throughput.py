"""Many trivial jobs from parallel clients, and jobs arriving at paced rates: Podium's
embedded cluster beside a real Slurm, on this machine, sides interleaved run by run.

    python bench/launch_throughput.py [--runs 3] [--jobs 1000] [--clients 4]
        [--modes cli,batch,array,paced] [--rates 5,10,20,30] [--paced-seconds 10]
        [--sides podium,slurm-tuned,slurm-default,slurm-spool-tmpfs]

Each job is `date +%s.%N > FILE`: it records, on the submitters' clock, when it
started. Modes:
  cli    CLIENTS threads each submit JOBS/CLIENTS jobs back to back, one CLI process
         per job: `podium submit` / `sbatch`, as users script them;
  batch  Podium only: one `podium submit --batch FILE` per client (one commit);
  array  one `--array=0-N` per client, on both sides;
  paced  open-loop arrivals at each of RATES jobs/s for PACED_SECONDS, one CLI process
         per job started on its schedule whatever the earlier ones do (as independent
         users would), so both sides see the same arrival rate: submit->start at equal
         load, up to and past each side's saturation.
Reported per mode and side, min / median / max over the runs (bench/tables.py prints
them as docs/benchmarks.md's tables): jobs/s end to end
(first submit until every job has started and the cluster lists none pending or
running), submits/s, submit->start p50/p99 (from just before the job's submit call to
the time inside the job), and CPU per job: of the cluster's own processes (Podium's
daemon, launcher, helpers, supervisors and jobs; Slurm's slurmctld, slurmds,
slurmstepds, jobs and its munged), measured by a cpuacct cgroup they are moved into;
of its controller alone (the daemon, slurmctld); and of the whole machine (clients
included). Ratios are Podium's median over the peer's, with the range of the per-run
ratios (each run's sides measured back to back).

Slurm's sides: `slurm-tuned` as its high-throughput guide advises (SLURM_TUNING:
deferred scheduling with a 1 s main loop, a deep queue, bounded RPC load, short
MinJobAge); `slurm-default` with SchedulerParameters unset (Slurm's defaults:
sched_interval=60, bf_interval=30, batch_sched_delay=3; scheduling on each submit);
`slurm-spool-tmpfs` tuned with the slurmds' spool on /dev/shm (where Podium, as root,
keeps running jobs' state). Needs root and Debian's slurm packages. A benchmark, not
a test: results go to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu_use import CpuGroup, machine_busy_s, pct
from bench.embedded import (
    BIN,
    SLURM_DEFAULT_SCHEDULER,
    EmbeddedCluster,
    compile_podium,
    embedded_config,
    slurm_definition,
    slurm_pids,
    slurm_testbed,
)
from bench.tables import launch_tables

ROOT = Path(__file__).resolve().parents[1]
SLURM_TUNING = {
    "SchedulerParameters": "defer,sched_interval=1,sched_min_interval=100000,"
    "batch_sched_delay=1,default_queue_depth=1000,partition_job_depth=0,max_rpc_cnt=150,"
    "bf_interval=5,bf_max_job_test=200",
    "MinJobAge": "5",
    "SlurmdDebug": "error",
    "SlurmctldDebug": "error",
}


class Side:
    """A cluster under test: how each mode submits, and whether jobs remain."""

    name = ""
    work: Path
    env: dict[str, str]

    def cli(self, command: str) -> None:
        raise NotImplementedError

    def array(self, count: int, command: str) -> None:
        raise NotImplementedError

    def batch(self, commands: list[str]) -> None:
        raise NotImplementedError

    def remaining(self) -> int:
        raise NotImplementedError

    def cluster_pids(self) -> list[int]:
        raise NotImplementedError

    def controller_cpu_s(self) -> float:
        """CPU seconds of the cluster's controller so far: Podium's daemon (every
        thread), slurmctld."""
        import psutil

        times = psutil.Process(self.cluster_pids()[0]).cpu_times()
        return float(times.user + times.system)


class PodiumSide(Side):
    name = "podium"

    def __init__(self, cluster: EmbeddedCluster) -> None:
        self.cluster, self.env, self.work = cluster, cluster.env, cluster.work
        self.http = cluster.client()

    def _run(self, *args: str) -> None:
        base = [str(BIN / "podium"), "submit", "-Q", "-o", "/dev/null"]
        subprocess.run([*base, *args], env=self.env, check=True, cwd=self.work)

    def cli(self, command: str) -> None:
        self._run("--wrap", command)

    def array(self, count: int, command: str) -> None:
        self._run(f"--array=0-{count - 1}", "--wrap", command)

    def batch(self, commands: list[str]) -> None:
        path = self.work / f"batch-{threading.get_ident()}.txt"
        quoted = ("--wrap '" + c.replace("'", "'\\''") + "'" for c in commands)
        path.write_text("\n".join(quoted) + "\n")
        self._run("--batch", str(path))

    def remaining(self) -> int:
        return len(self.http.get("/v1/jobs", params={"fields": "job_id"}).json()["rows"])

    def cluster_pids(self) -> list[int]:
        daemon = int((self.cluster.home / "podiumd.pid").read_text())
        import psutil

        return [daemon, *(p.pid for p in psutil.Process(daemon).children())]


class SlurmSide(Side):
    name = "slurm"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
        self.env.pop("SLURM_JWT", None)
        self.work = directory / "work"
        self.work.mkdir(exist_ok=True)

    def _run(self, *args: str) -> None:
        argv = ["sbatch", "-Q", "-o", "/dev/null", *args]
        subprocess.run(argv, env=self.env, check=True, cwd=self.work)

    def cli(self, command: str) -> None:
        self._run("--wrap", command)

    def array(self, count: int, command: str) -> None:
        self._run(f"--array=0-{count - 1}", "--wrap", command)

    def remaining(self) -> int:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-o", "%i"], env=self.env, capture_output=True, text=True
        )
        return len(out.stdout.split()) if out.returncode == 0 else 1

    def cluster_pids(self) -> list[int]:
        """slurmctld first, then the slurmds and the cluster's munged (Slurm's
        authentication: each RPC's credential is made and checked by it)."""
        pids = slurm_pids(self.directory)
        return [*pids["slurmctld"], *pids["slurmd"], *pids["munged"]]


def run_mode(side: Side, mode: str, jobs: int, clients: int) -> dict[str, Any]:
    """Submit `jobs` trivial jobs from `clients` threads; wait for all; the figures."""
    stamps = Path(tempfile.mkdtemp(prefix="podium-bench-stamps-", dir=side.work))
    os.chmod(stamps, 0o777)
    per = jobs // clients
    submitted: dict[str, float] = {}
    lock = threading.Lock()

    def command(token: str) -> str:
        return f"date +%s.%N > {stamps}/{token}"

    def client(k: int) -> None:
        if mode == "cli":
            for i in range(per):
                with lock:
                    submitted[f"{k}-{i}"] = time.time()
                side.cli(command(f"{k}-{i}"))
        elif mode == "batch":
            now = time.time()
            with lock:
                submitted.update({f"{k}-{i}": now for i in range(per)})
            side.batch([command(f"{k}-{i}") for i in range(per)])
        else:  # array: the task id names the stamp
            now = time.time()
            with lock:
                submitted.update({f"{k}-{i}": now for i in range(per)})
            side.array(per, command(f"{k}-$SLURM_ARRAY_TASK_ID"))

    group = CpuGroup(side.name)
    group.add(side.cluster_pids())
    cpu0, busy0, ctl0, t0 = group.usage_s(), machine_busy_s(), side.controller_cpu_s(), time.time()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_submitted = time.time()
    wait_all_started(side, stamps, per * clients, mode)
    t_done = time.time()
    cpu, busy = group.usage_s() - cpu0, machine_busy_s() - busy0
    controller = side.controller_cpu_s() - ctl0
    group.remove()
    starts = {p.name: float(p.read_text() or "nan") for p in stamps.iterdir()}
    latency = [starts[k] - v for k, v in submitted.items() if k in starts]
    shutil.rmtree(stamps, ignore_errors=True)
    count = per * clients
    return {
        "jobs": count,
        "started": len(starts),
        "jobs_per_s": count / (t_done - t0),
        "submits_per_s": count / (t_submitted - t0),
        "submit_start_p50_s": pct(latency, 0.5),
        "submit_start_p99_s": pct(latency, 0.99),
        "cluster_cpu_ms_per_job": 1000 * cpu / count,
        "controller_cpu_ms_per_job": 1000 * controller / count,
        "machine_cpu_ms_per_job": 1000 * busy / count,
    }


def wait_all_started(side: Side, stamps: Path, count: int, what: str) -> None:
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline:
        if len(os.listdir(stamps)) >= count and side.remaining() == 0:
            return
        time.sleep(0.1)
    raise SystemExit(f"{side.name} {what}: jobs did not finish in time")


def run_paced(side: Side, rate: float, seconds: float) -> dict[str, Any]:
    """Jobs arriving at `rate` per second for `seconds`, one CLI process each started
    on schedule (open loop); submit->start of each, and how late the arrivals were."""
    stamps = Path(tempfile.mkdtemp(prefix="podium-bench-stamps-", dir=side.work))
    os.chmod(stamps, 0o777)
    count = max(1, round(rate * seconds))
    submitted: dict[str, float] = {}
    lateness: list[float] = []
    t0 = time.time() + 0.5

    def arrival(i: int) -> None:
        due = t0 + i / rate
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        began = time.time()
        submitted[str(i)] = began
        lateness.append(began - due)
        side.cli(f"date +%s.%N > {stamps}/{i}")

    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(arrival, range(count)))
    t_submitted = time.time()
    wait_all_started(side, stamps, count, f"paced {rate}/s")
    starts = {p.name: float(p.read_text() or "nan") for p in stamps.iterdir()}
    latency = [starts[k] - v for k, v in submitted.items() if k in starts]
    shutil.rmtree(stamps, ignore_errors=True)
    return {
        "jobs": count,
        "offered_per_s": rate,
        "submits_per_s": count / (t_submitted - t0),
        "arrival_late_p99_s": pct(lateness, 0.99),
        "submit_start_p50_s": pct(latency, 0.5),
        "submit_start_p99_s": pct(latency, 0.99),
    }


SIDES = ("podium", "slurm-tuned", "slurm-default", "slurm-spool-tmpfs")
SLURM_SETTINGS: dict[str, Mapping[str, str | None]] = {
    "slurm-tuned": SLURM_TUNING,
    "slurm-spool-tmpfs": SLURM_TUNING,
    "slurm-default": {**SLURM_DEFAULT_SCHEDULER, "SlurmdDebug": "error", "SlurmctldDebug": "error"},
}


def with_side(name: str, body: Callable[[Side], dict[str, Any]]) -> dict[str, Any]:
    """Run `body` on a fresh cluster of side `name` (SIDES)."""
    if name == "podium":
        with EmbeddedCluster(embedded_config(cpus=64, gpus=8, interval_s=0.5)) as cluster:
            return body(PodiumSide(cluster))
    definition = slurm_definition("bench", nodes=2, cpus=32, gpus=4)
    tmpfs = name == "slurm-spool-tmpfs"
    settings = SLURM_SETTINGS[name]
    with slurm_testbed(definition, 19900, settings=settings, spool_on_tmpfs=tmpfs) as path:
        return body(SlurmSide(path))


def one_side(side: Side, modes: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Every mode of one run on one fresh cluster."""
    out: dict[str, Any] = {}
    for mode in modes:
        if mode == "paced":
            for rate in args.rates:
                out[f"paced@{rate:g}"] = run_paced(side, rate, args.paced_seconds)
        elif not (mode == "batch" and side.name == "slurm"):
            out[mode] = run_mode(side, mode, args.jobs, args.clients)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--modes", default="cli,batch,array,paced")
    parser.add_argument("--rates", default="5,10,20,30", help="paced arrivals, jobs/s")
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    parser.add_argument("--sides", default="podium,slurm-tuned,slurm-default")
    args = parser.parse_args()
    args.rates = [float(r) for r in args.rates.split(",")]
    compile_podium()
    if os.geteuid() != 0:
        raise SystemExit("needs root (cpuacct cgroups, and Slurm's daemons)")
    modes, sides = args.modes.split(","), args.sides.split(",")
    for name in sides:
        if name not in SIDES:
            raise SystemExit(f"--sides: unknown side {name!r}; known: {', '.join(SIDES)}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    for run in range(args.runs):
        for name in sides:  # interleaved: each run measures every side back to back
            got = with_side(name, lambda side: one_side(side, modes, args))
            runs[name].append(got)
            print(f"run {run + 1} {name}", json.dumps(got), flush=True)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    path = out / f"launch-throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    record = {"args": vars(args), "slurm_settings": SLURM_SETTINGS, "runs": runs}
    print("\n".join(launch_tables(record)))  # docs/benchmarks.md's tables
    path.write_text(json.dumps(record, indent=2))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
