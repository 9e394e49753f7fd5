"""What each pytest-xdist worker owns, so that tests running side by side never meet.

The suite runs in parallel workers (pyproject.toml's addopts: `-n`, `--dist loadgroup`).
Most of what a test starts is private by construction: a daemon's home, its Unix
socket and its job state live in a fresh temporary directory, and the ports a job or
daemon binds on loopback are the kernel's pick. What is not is named here:

- **TCP port ranges.** A Slurm or Kubernetes test cluster binds a run of fixed ports
  from its port base (and a Slurm cluster of hosts names its network namespaces,
  bridge and veths, and picks its private /24, from that base). `port_base(nominal)`
  moves a module's nominal base into the worker's own range: worker N's bases sit
  N x PORT_STRIDE below worker 0's, all under 20,000 (clear of the jobs' own
  MASTER_PORTs, 20,000-40,000, and of the kernel's ephemeral ports, 32,768 up).
- **Unix users.** Tests share a few second users (podium-test and the like), made once
  by whichever worker gets there first: `ensure_user` makes them race-free.

Everything else a test needs to share across workers (the Kubernetes build cache, the
Slurm clients' venv) is built under a lock by whoever comes first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path

# The nominal port bases in use are 18,800-19,600, each cluster binding up to ~220
# ports above its base: a worker's span is under 1,100, so the ranges never overlap,
# and neither do the Slurm clusters' /24s (the base's hundreds pick the third octet).
PORT_STRIDE = 1100
LOWEST_BASE = 18_800
MAX_WORKERS = (LOWEST_BASE - 1024) // PORT_STRIDE  # 16: the lowest base stays above 1024
LOCKS = Path("/tmp/podium-test-locks")


def worker_index() -> int:
    """This process's pytest-xdist worker (0 for gw0, and for a run without workers)."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw"))


def port_base(nominal: int) -> int:
    """`nominal`, one of the modules' fixed port bases, in this worker's range."""
    index = worker_index()
    if index >= MAX_WORKERS:
        raise AssertionError(f"worker gw{index}: at most {MAX_WORKERS} workers have ports")
    return nominal - index * PORT_STRIDE


@contextlib.contextmanager
def machine_lock(name: str, shared: bool = False) -> Iterator[None]:
    """Hold a lock on this machine, against every worker (and every concurrent run):
    exclusive, or `shared` with the other shared holders."""
    LOCKS.mkdir(mode=0o700, exist_ok=True)
    with open(LOCKS / f"{name}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_user(name: str) -> pwd.struct_passwd:
    """The Unix user `name`, made (no home, bash) if this machine lacks it; needs root.
    Tests never remove these users: another worker may be running as one."""
    with machine_lock("users"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/bin/bash", name], check=True
            )
            return pwd.getpwnam(name)
