"""torchx's slurm scheduler against Podium's Slurm commands, through the torchx CLI as a
user types it: run by tests/integration/test_slurm_clients.py; prints one JSON object.

The DDP script destroys its process group before it exits: without that, gloo's threads
outlive the interpreter on a loaded machine and rank 0 aborts with "terminate called
without an active exception" (seen in CI; pytorch#75097), which is the script's fault,
not the launcher's.
It waits in a loop of its own: the clients' environment cannot import tests/polling.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

DDP = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("rank", dist.get_rank(), "world", dist.get_world_size(), "sum", int(t.item()))
dist.destroy_process_group()
"""


def torchx(*args: str) -> str:
    done = subprocess.run(["torchx", *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"torchx {' '.join(args)}: {done.returncode}: {done.stderr[-2000:]}"
                         + job_logs(done.stderr))  # fmt: skip
    return done.stdout


def job_logs(torchx_stderr: str) -> str:
    """The failed app's own stdout and stderr, so a failure in CI says why the job failed."""
    launched = re.search(r"Launched app: (slurm://\S+)", torchx_stderr)
    if launched is None:
        return ""
    logs = []
    for stream in ("stdout", "stderr"):
        done = subprocess.run(["torchx", "log", "--stream", stream, launched.group(1)],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        logs.append(f"\n--- job {stream} ---\n{done.stdout[-3000:]}{done.stderr[-1000:]}")
    return "".join(logs)


def app_id(text: str) -> str:
    return text.strip().splitlines()[-1]


def state(app: str) -> str:
    for line in torchx("status", app).splitlines():
        if line.strip().startswith("State:"):
            return line.split(":", 1)[1].strip()
    return "?"


def main() -> None:
    out: dict[str, object] = {}
    echo = app_id(torchx("run", "-s", "slurm", "--wait", "utils.echo", "--msg", "hello podium"))
    out["echo_state"] = state(echo)
    out["echo_log"] = torchx("log", "--stream", "stdout", echo).strip()
    Path("ddp_echo.py").write_text(DDP)
    ddp = app_id(torchx("run", "-s", "slurm", "--wait", "dist.ddp", "-j", "1x2",
                        "--script", "ddp_echo.py"))  # fmt: skip
    out["ddp_state"] = state(ddp)
    out["ddp_log"] = sorted(torchx("log", "--stream", "stdout", ddp).strip().splitlines())
    sleeper = app_id(torchx("run", "-s", "slurm", "utils.sh", "sleep", "60"))
    deadline = time.monotonic() + 60
    while state(sleeper) != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.5)
    torchx("cancel", sleeper)
    out["cancelled_state"] = state(sleeper)
    listed = dict(line.split() for line in torchx("list", "-s", "slurm").splitlines()
                  if line.startswith("slurm://"))  # fmt: skip
    out["listed"] = {app: listed.get(app) for app in (echo, ddp, sleeper)}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
