"""Many trivial jobs from parallel clients: Podium's embedded cluster beside a real Slurm
tuned for throughput, on this machine, one after the other (issue 13).

    python bench/launch_throughput.py [--jobs 2000] [--clients 4] [--modes cli,batch,array]
                                      [--sides podium,slurm,slurm-spool-tmpfs]

Each job is `date +%s.%N > FILE`: it records, on the submitters' clock, when it
started. Each of CLIENTS threads submits JOBS/CLIENTS jobs, back to back:
  cli    one CLI process per job: `podium submit` / `sbatch`, as users script them;
  batch  Podium only: one `podium submit --batch FILE` per client (one commit);
  array  one `--array=0-N` per client, on both sides.
Reported per mode and side: jobs/s end to end (first submit until every job has
started and the cluster lists none pending or running), submits/s, submit->start
p50/p99 (from the time just before the job's submit call to the time inside it), and
CPU per job: of the cluster's own processes (Podium's daemon, launcher, supervisors
and jobs; Slurm's slurmctld, slurmd, slurmstepd and jobs), measured by a cpuacct
cgroup they are moved into; of its controller alone (the daemon, slurmctld); and of
the whole machine (clients included).

Slurm is tuned as its high-throughput guide advises (SLURM_TUNING below: deferred
scheduling with a 1 s main loop, a deep queue, bounded RPC load, short MinJobAge),
which docs/benchmarks.md lists; it runs twice, its slurmds' spool on the state disk
(as installed) and on /dev/shm (where Podium, as root, keeps running jobs' state).
Needs root and Debian's slurm packages. A benchmark, not a test: results go to
bench/results/.
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
SLURM_TUNING = {
    "SchedulerParameters": "defer,sched_interval=1,sched_min_interval=100000,"
    "batch_sched_delay=1,default_queue_depth=1000,partition_job_depth=0,max_rpc_cnt=150,"
    "bf_interval=5,bf_max_job_test=200",
    "MinJobAge": "5",
    "SlurmdDebug": "error",
    "SlurmctldDebug": "error",
}
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy (not idle, iowait or steal)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


class CpuGroup:
    """A cpuacct cgroup the cluster's processes are moved into (their children follow)."""

    def __init__(self, name: str) -> None:
        self.path = CPUACCT / f"podium-bench-{name}-{os.getpid()}"
        self.path.mkdir()

    def add(self, pids: list[int]) -> None:
        for pid in pids:
            (self.path / "cgroup.procs").write_text(str(pid))

    def usage_s(self) -> float:
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():
            (CPUACCT / "cgroup.procs").write_text(pid)
        self.path.rmdir()


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
        """slurmctld first, then the slurmds."""
        run = self.directory / "run"
        ctld = int((run / "slurmctld.pid").read_text())
        return [ctld, *(int(p.read_text()) for p in run.glob("slurmd*.pid"))]


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
    deadline = time.monotonic() + 1200
    while time.monotonic() < deadline:
        if len(os.listdir(stamps)) >= per * clients and side.remaining() == 0:
            break
        time.sleep(0.1)
    else:
        raise SystemExit(f"{side.name} {mode}: jobs did not finish in time")
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


SIDES = ("podium", "slurm", "slurm-spool-tmpfs")


def with_side(name: str, body: Callable[[Side], dict[str, Any]]) -> dict[str, Any]:
    """Run `body` on a fresh cluster: podium, slurm (its spool on the state disk, as
    installed), or slurm-spool-tmpfs (each slurmd's spool on /dev/shm, as Podium keeps
    its running jobs' state on a tmpfs)."""
    if name == "podium":
        with EmbeddedCluster(embedded_config(cpus=64, gpus=8, interval_s=0.5)) as cluster:
            return body(PodiumSide(cluster))
    definition = slurm_definition("bench", nodes=2, cpus=32, gpus=4)
    tmpfs = name == "slurm-spool-tmpfs"
    with slurm_testbed(definition, 19900, settings=SLURM_TUNING, spool_on_tmpfs=tmpfs) as path:
        return body(SlurmSide(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--modes", default="cli,batch,array")
    parser.add_argument("--sides", default=",".join(SIDES), help=f"of {', '.join(SIDES)}")
    args = parser.parse_args()
    compile_podium()
    if os.geteuid() != 0:
        raise SystemExit("needs root (cpuacct cgroups, and Slurm's daemons)")
    modes = args.modes.split(",")
    results: dict[str, dict[str, Any]] = {}
    for name in args.sides.split(","):
        if name not in SIDES:
            raise SystemExit(f"--sides: unknown side {name!r}; known: {', '.join(SIDES)}")
        wanted = [m for m in modes if not (name.startswith("slurm") and m == "batch")]
        results[name] = with_side(
            name,
            lambda side, wanted=wanted: {
                m: run_mode(side, m, args.jobs, args.clients) for m in wanted
            },
        )
        print(name, json.dumps(results[name], indent=1), flush=True)
    keys = ("jobs_per_s", "submits_per_s", "submit_start_p50_s", "submit_start_p99_s")
    keys += ("cluster_cpu_ms_per_job", "controller_cpu_ms_per_job", "machine_cpu_ms_per_job")
    peers = [n for n in SIDES[1:] if n in results]
    if "podium" in results and peers:
        print(f"{'':38}{'podium':>10}" + "".join(f"{p:>19}{'ratio':>7}" for p in peers))
        for mode in modes:
            base = "array" if mode == "batch" else mode
            for key in keys:
                a = results["podium"].get(mode, {}).get(key)
                if a is None:
                    continue
                label = f"{mode} {key}" + (" (slurm: array)" if mode == "batch" else "")
                row = f"{label:38}{a:10.3f}"
                for peer in peers:
                    b = results[peer].get(base, {}).get(key)
                    row += f"{b:19.3f}{a / b:7.2f}" if b else f"{'':26}"
                print(row)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    path = out / f"launch-throughput-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(
        json.dumps({"args": vars(args), "slurm_tuning": SLURM_TUNING, **results}, indent=2)
    )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
