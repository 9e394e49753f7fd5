"""A slow host inside a running elastic job on Slurm, confirmed and left: the keeper's
side of `podium.recover.slow_links`. Standard library only (the keeper's).

The ranks name a suspect by their link checks; the keeper confirms it with the
two-host yardstick (`podium.node.health.collective_perf all_reduce`, as `podium health
--deep --nodes` runs it) while the ranks are stopped: the suspect beside a known-good
host, and two known-good hosts for the figure to expect. Slower than MIN_FRACTION of
that figure (or failed) convicts it: the node is drained with both figures in the
reason (`nccl-health: ...`, which the health hook never resumes: `podium resume NODE`
once mended), and the job goes on without it. Each yardstick rank is a step of its
host's job (`srun --jobid`), as the replicas are.
"""

from __future__ import annotations

import os
import subprocess
import sys

from podium.backends.slurm.keeper_parts import address
from podium.node.health.nccl import parse_nccl_tests

MIN_FRACTION = 0.7  # as health.nccl_min_fraction's default
YARDSTICK = ["-m", "podium.node.health.collective_perf", "all_reduce", "-b", "4M", "-e", "4M",
             "-n", "5", "-w", "2"]  # fmt: skip
YARDSTICK_S = 120.0


def yardstick(pair: list[tuple[str, str]], port: int, env: dict[str, str]) -> float | None:
    """The all_reduce busbw (GB/s) between the two (job, node) places, one rank a step
    of each job; None when the run failed or printed no figure."""
    procs = []
    for rank, (job, _) in enumerate(pair):
        step_env = dict(env, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK="0",
                        MASTER_ADDR=address(pair[0][1]), MASTER_PORT=str(port))  # fmt: skip
        command = ["srun", f"--jobid={job}", "--nodes=1", "--ntasks=1", "--job-name=yardstick",
                   sys.executable, *YARDSTICK]  # fmt: skip
        procs.append(subprocess.Popen(
            command, env=step_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        ))  # fmt: skip
    outputs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=YARDSTICK_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        outputs.append((proc.returncode, out.decode(errors="replace")))
    if any(code != 0 for code, _ in outputs):
        return None
    largest = parse_nccl_tests(outputs[0][1]).largest
    return largest.busbw if largest is not None else None


def drain(node: str, reason: str) -> str | None:
    """Drain `node` with `reason`; None when done, else Slurm's refusal (a user who is
    not a Slurm operator may not drain nodes)."""
    try:
        done = subprocess.run(
            ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stderr.strip() or f"rc {done.returncode}")


def step_env() -> dict[str, str]:
    """The keeper's environment less Slurm's own: a step's job is named by --jobid."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") or k == "SLURM_CONF"}


__all__ = ["MIN_FRACTION", "drain", "step_env", "yardstick"]
