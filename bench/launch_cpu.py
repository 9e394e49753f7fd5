"""CPU per job of the local launch path alone, warm (the fork server) beside cold (a new
interpreter per supervisor), in one run.

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


def measure(warm: bool, jobs: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="podium-bench-launch-"))
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
    cold, warm = measure(False, args.jobs), measure(True, args.jobs)
    print(json.dumps({"cold": cold, "warm": warm}, indent=1))
    print(
        f"CPU per job: cold {cold['cpu_ms_per_job']:.1f} ms, warm {warm['cpu_ms_per_job']:.1f}"
        f" ms ({warm['cpu_ms_per_job'] / cold['cpu_ms_per_job']:.2f})"
    )


if __name__ == "__main__":
    main()
