"""`podium demo --faults`: the training job survives a GPU falling off the bus.

The example PyTorch job (2 ranks, 2 GPUs, auto-resume) trains and checkpoints; an
Xid 79 is written to the kernel log the health agent watches, for one of the job's
GPUs. The agent fences that GPU; the job ends NODE_FAIL, is requeued avoiding it, and
resumes from its last checkpoint on healthy GPUs. The step counter shows that no work
before the last checkpoint is redone.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from podium.api.states import TERMINAL_STATES
from podium.backends.embedded.client import EmbeddedBackend
from podium.cli import render
from podium.cli.daemon_cmds import start_daemon, stop_daemon
from podium.cli.inject import xid_line
from podium.config.cluster import HealthConfig
from podium.errors import PodiumError

TERMINAL = TERMINAL_STATES
HEALTH_INTERVAL_S = HealthConfig().interval_s  # the demo keeps the default
DECLARED = "{source: declared, count: 4, type: h100, memory_mb: 81920}"

CONFIG = """\
node:
  name: node0
  cpus: 8
  memory_mb: 16000
  gpus: {gpus}
kill_wait_s: 5
scheduler_interval_s: 0.2
health:
  kernel_log: {kernel_log}
  deep_interval_s: 86400
"""

JOB = """\
#!/bin/bash
#SBATCH --job-name=llm
#SBATCH --ntasks={ranks}
#SBATCH --gpus-per-task=1
#SBATCH --time=00:15:00
#SBATCH --output=%x-%j.out
#PODIUM --auto-resume=2
#PODIUM --heartbeat-timeout=120
srun python3 {examples}/train.py --model gpt --steps {steps} --checkpoint-every 25 \\
  --step-time 0.03 --progress {progress}
"""


def read_progress(path: Path) -> list[dict[str, Any]]:
    """The training job's progress records (see examples/train.py)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line being written
    return out


def run_fault_demo(home: Path, examples: Path, keep: bool, timeout: float) -> bool:
    """Run the scenario; True when the job resumed from its last checkpoint and finished."""
    work = home / "work"
    work.mkdir(parents=True, exist_ok=True)
    kernel_log = home / "kern.log"
    kernel_log.touch()
    from podium.node.inventory import read_nvml

    real = read_nvml() or []  # the machine's NVIDIA GPUs (none without a driver)
    # Resuming on healthy GPUs needs as many left after one is fenced: with G >= 2
    # real GPUs the job takes G//2; with fewer, four GPUs are declared.
    use_real = len(real) >= 2
    ranks = len(real) // 2 if use_real else 2
    gpus = "{source: nvml}" if use_real else DECLARED
    (home / "cluster.yaml").write_text(CONFIG.format(kernel_log=kernel_log, gpus=gpus))
    progress = work / "progress.jsonl"
    script = work / "llm.sh"
    script.write_text(JOB.format(examples=examples, steps=300, progress=progress, ranks=ranks))
    started = start_daemon(home)
    client = EmbeddedBackend(home)
    what = f"{len(real)} real GPUs" if use_real else "4 declared GPUs"
    click.echo(
        f"Embedded cluster up (daemon pid {started['pid']}), {what}; "
        f"the health agent watches {kernel_log}"
    )
    if len(real) == 1:
        click.echo(
            "This machine has 1 GPU; resuming on a healthy GPU needs at least 2, so the "
            "scenario runs on 4 declared GPUs and the job trains on the CPU."
        )
    click.echo("")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    try:
        from podium.cli.submit import build_request

        request, _ = build_request([str(script)])
        request["cwd"] = str(work)
        request["environment"] = env
        job_id = client.submit(request)[0]["job_id"]
        click.echo(f"submitted job {job_id}: GPT, {ranks} ranks on {ranks} GPUs, --auto-resume=2")
        run = _Run(client, job_id, work, progress, time.monotonic() + timeout)
        return run.fault_and_resume(kernel_log)
    finally:
        client.close()
        if not keep:
            stop_daemon(home)


@dataclass
class _Run:
    """The demo's job, followed through its progress file and the daemon."""

    client: EmbeddedBackend
    job_id: int
    work: Path
    progress: Path
    deadline: float  # time.monotonic()

    def wait_for(self, what: str, predicate: Callable[[], Any], until_end: bool = False) -> Any:
        """Wait for `predicate`; stop at once, saying why, if the job ends first."""
        while True:
            value = predicate()
            if value:
                return value
            job = self.client.job(self.job_id)
            if not until_end and job["state"] in TERMINAL:
                raise PodiumError(
                    f"the fault demo cannot go on: job {self.job_id} ended {job['state']} "
                    f"({job['reason']}) before {what}; see {self.work}"
                )
            if time.monotonic() > self.deadline:
                raise PodiumError(f"the fault demo timed out waiting for {what}")
            time.sleep(0.1)

    def checkpoints(self) -> list[int]:
        return [r["step"] for r in read_progress(self.progress) if r["event"] == "checkpoint"]

    def restarted(self) -> list[dict[str, Any]]:
        return [r for r in read_progress(self.progress) if r["restart"] >= 1]

    def fault_and_resume(self, kernel_log: Path) -> bool:
        """After the second checkpoint, write an Xid 79 for the job's first GPU; wait
        for the job to resume and finish; report; True when it went as it should."""
        bus_ids = {g["index"]: g["bus_id"] for g in self.client.nodes()[0]["gpus"]}
        self.wait_for("the second checkpoint", lambda: len(self.checkpoints()) >= 2)
        job = self.client.job(self.job_id)
        bad = job["gpu_ids"][0]
        reached = max(r["step"] for r in read_progress(self.progress))
        click.echo(
            f"job {self.job_id} runs on GPUs {job['gpu_ids']}; last checkpoint at step "
            f"{max(self.checkpoints())}, now at step {reached}\n"
        )
        with open(kernel_log, "a") as fh:
            fh.write(xid_line(bus_ids[bad], 79, time.clock_gettime(time.CLOCK_BOOTTIME)))
        fault_at = time.time()
        click.echo(f">>> Xid 79 (GPU has fallen off the bus) written for GPU {bad}\n")
        after = self.wait_for(
            "the job to resume", lambda: [r for r in self.restarted() if r["event"] == "step"]
        )
        render.show_nodes(self.client.nodes())
        job = self.client.job(self.job_id)
        click.echo(
            f"\njob {self.job_id}: {job['state']} on GPUs {job['gpu_ids']}, "
            f"restart {job['restart_count']}"
        )
        for e in job["events"]:
            if e["kind"] in ("start", "requeue", "end"):
                click.echo(f"  {e['time'] - fault_at:+7.2f}s  {e['kind']:8} {e['detail'] or ''}")
        requeued = next((e["time"] for e in job["events"] if e["kind"] == "requeue"), None)
        first_run = [r for r in read_progress(self.progress) if r["restart"] == 0]
        stopped_at = max(r["step"] for r in first_run)
        last_ckpt = max(r["step"] for r in first_run if r["event"] == "checkpoint")
        resume = next(r for r in self.restarted() if r["event"] in ("resume", "begin"))
        done = self.wait_for(
            "the job to finish",
            lambda: (j := self.client.job(self.job_id))["state"] in TERMINAL and j,
            until_end=True,
        )
        redone = stopped_at - resume["step"]
        click.echo(
            f"\nsteps: last checkpoint at step {last_ckpt}; the run was at step {stopped_at} "
            f"when GPU {bad} was fenced; it resumed at step {resume['step']}: the {redone} "
            "steps since the checkpoint are redone, nothing before it"
        )
        to_requeue = f"{requeued - fault_at:.2f}s" if requeued is not None else "not seen"
        click.echo(
            f"fault to requeue: {to_requeue}; fault to first step after restart: "
            f"{after[0]['t'] - fault_at:.1f}s (health.interval_s at its default, "
            f"{HEALTH_INTERVAL_S:g}s: the kernel's log is followed as it is written); "
            f"job {self.job_id} ended {done['state']} after {done['restart_count']} restart(s)"
        )
        ok = bool(
            done["state"] == "COMPLETED"
            and bad not in job["gpu_ids"]
            and resume["step"] == last_ckpt
        )
        click.echo(
            f"\nGPU {bad} stays fenced (unschedulable-pending-reboot: no reboot_command is "
            "configured); the other GPUs kept working."
            if ok
            else "\nThe fault demo did not go as expected: see above."
        )
        return ok
