"""CPU per job of the local launch path alone, in one run: warm (the fork server) beside
cold (a new interpreter per supervisor), and the job state on a tmpfs (as a root
daemon keeps it, podium.run.rundir) beside the state disk (/tmp here).

    python bench/launch_cpu.py [--jobs 200]

Starts JOBS trivial jobs (`/bin/true`) through `podium.run.executor.LocalExecutor`
for each mode and waits for them all; everything it starts (launcher, supervisors,
jobs) runs in a cpuacct cgroup made for the run, whose usage per job is reported, with
the wall time. Needs root (cgroups). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from podium.run.executor import LocalExecutor
from podium.run.plan import LaunchPlan, TaskPlan

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def plan(job_id: int, work: Path) -> LaunchPlan:
    return LaunchPlan(
        job_id=job_id, name="t", user="root", uid=os.getuid(), gid=os.getgid(), groups=[],
        argv=["/bin/true"], work_dir=str(work), submit_dir=str(work),
        environment={"PATH": "/usr/bin:/bin"}, tasks=[TaskPlan(0, 0, [])],
        stdout="/dev/null", stderr=None, stdin=None, open_mode="truncate", node="n0",
        gpu_ids=[], cpus=1, cpus_per_task=1, time_limit_s=None, kill_wait_s=2.0,
        proctrack="auto",
    )  # fmt: skip


def measure(warm: bool, jobs: int, state: str | None = None) -> dict[str, float]:
    """Launch CPU per job and jobs/s; the jobs directory under `state` (None: /tmp)."""
    work = Path(tempfile.mkdtemp(prefix="podium-bench-launch-", dir=state))
    group = CPUACCT / f"podium-bench-launch-{os.getpid()}"
    group.mkdir()
    (group / "cgroup.procs").write_text(str(os.getpid()))
    try:
        executor = LocalExecutor(work / "jobs", warm=warm)
        if executor.launcher is not None:
            executor.launcher.warm_up()
        time.sleep(0.5)
        used0, t0 = int((group / "cpuacct.usage").read_text()), time.perf_counter()
        for job_id in range(1, jobs + 1):
            executor.launch(plan(job_id, work), "#!/bin/sh\n")
        for job_id in range(1, jobs + 1):
            while executor.poll(job_id).status == "running":
                time.sleep(0.05)  # rare: the polling is on the measured CPU too
        wall = time.perf_counter() - t0
        used = (int((group / "cpuacct.usage").read_text()) - used0) / 1e9
        executor.close()
        while executor.reap():
            time.sleep(0.01)
    finally:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()
        shutil.rmtree(work, ignore_errors=True)
    return {"cpu_ms_per_job": 1000 * used / jobs, "jobs_per_s": jobs / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    args = parser.parse_args()
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    runs = {
        "cold (tmpfs)": measure(False, args.jobs, tmpfs),
        "warm (disk)": measure(True, args.jobs),
        "warm (tmpfs)": measure(True, args.jobs, tmpfs),
    }
    print(json.dumps(runs, indent=1))
    for name, run in runs.items():
        cpu, rate = run["cpu_ms_per_job"], run["jobs_per_s"]
        print(f"{name:14} {cpu:6.1f} ms CPU per job, {rate:6.1f} jobs/s")


if __name__ == "__main__":
    main()
