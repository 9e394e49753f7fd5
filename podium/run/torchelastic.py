"""Spares for TorchElastic (`torchrun`) jobs, unchanged: what Podium does so that a
replica lost to a fault is replaced by a spare through TorchElastic's own rendezvous,
with no requeue (docs/resiliency.md, "torchrun and Lightning"). Standard library only
(the supervisor imports it at every job start).

A job is a TorchElastic one when its script launches `torchrun` (or
`python -m torch.distributed.run`/`.launch`) and it holds spares. Each replica is then
a TorchElastic node: its `torchrun` agent and the workers that agent starts. Podium:

- hosts the c10d rendezvous store itself, at MASTER_ADDR:MASTER_PORT, in a process of
  the job's own (the job's user, cgroup and process group) started before the agents:
  each agent then finds the port taken and joins as a client (TorchElastic's own
  fallback), so the rendezvous outlives any one replica. Without it the first agent
  hosts the store and a fault on that replica ends the rendezvous for all;
- on a fault of one replica (an Xid on its GPU, its agent killed or crashed) kills that
  replica alone, its orphaned workers included (SIGKILL: an agent stopped with SIGTERM
  closes the rendezvous for every node), fences its GPUs and starts the job's command
  on a spare's GPUs with the same rendezvous endpoint: a new node. The survivors'
  workers fail on the lost peer, their agents restart them (`--max-restarts`), and
  the next round takes the new node in once the dead one's keep-alive has expired
  (TorchElastic's `keep_alive_interval` x `keep_alive_max_attempt`: 5 s x 3 by its
  default, 1 s x 2 by Podium's, below). The workers resume from their checkpoint, as
  TorchElastic restarts them. The spare starts cold, its agent's start hidden by
  that expiry: an agent started beforehand, waiting in TorchElastic's redundancy
  list, makes the rendezvous restart for ever at the first restart after it joined
  (torch 2.13, without Podium: three agents for `--nnodes=2`, one worker killed,
  every agent stopping its workers about once a second, none training again);
- sets PET_RDZV_CONF (torchrun's `--rdzv-conf` where the command gives none, and the
  job's environment sets no PET_RDZV_CONF) to keep_alive_interval=1,
  keep_alive_max_attempt=2: a dead node is dropped from the rendezvous 2 s after its
  last heartbeat, not 15 s (fault to next step: docs/benchmarks.md). A heartbeat is
  one small write to the store a second; a node whose heartbeat is late twice is
  dropped and joins again (a restart of every worker, not a failure);
- sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 in the job's environment (unless the job
  set it): with the agents' shared store (the default since PyTorch 2.4) a node that
  joins in a later round waits for a MASTER_ADDR that only the first round wrote, and
  the rendezvous times out (seen with torch 2.13: `wait timeout after 60000ms, keys:
  /torch.rendezvous.ID.1/MASTER_ADDR`; pytorch/pytorch#135712).
"""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from pathlib import Path

LAUNCHERS = re.compile(r"(?<![\w.-])(?:torchrun|torch\.distributed\.(?:run|launch))(?![\w.-])")
NO_SHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
RDZV_CONF_ENV = "PET_RDZV_CONF"  # torchrun's --rdzv-conf, where the command gives none
KEEP_ALIVE = "keep_alive_interval=1,keep_alive_max_attempt=2"  # a dead node gone in 2 s
STORE_READY_S = 60.0  # how long the store host may take to import torch and listen

# What the store host runs (`python -c STORE_SOURCE ADDR PORT`): a c10d TCPStore
# server, as TorchElastic's c10d backend would host it, until the job ends.
STORE_SOURCE = """\
import sys, threading
from datetime import timedelta
from torch.distributed import TCPStore
store = TCPStore(sys.argv[1], int(sys.argv[2]), is_master=True, multi_tenant=True,
                 wait_for_workers=False, timeout=timedelta(seconds=60))
threading.Event().wait()
"""


def launches_torchelastic(script: str) -> bool:
    """Whether a job script starts TorchElastic's launcher (`torchrun`, or
    `-m torch.distributed.run` / `.launch`), on any line that is not a comment."""
    for line in script.splitlines():
        code = line.split("#", 1)[0] if not line.startswith("#!") else ""
        if LAUNCHERS.search(code):
            return True
    return False


def store_interpreter(path: str) -> str | None:
    """The Python the job's `torchrun` runs under (its script's `#!` line), found on
    the job's PATH; else the job's `python3`; None when neither is there. The PATH is
    the user's: call it as the user (Identity.entered); a `torchrun` that is not a
    regular file (a FIFO would block the open) is passed over."""
    for directory in path.split(os.pathsep):
        candidate = Path(directory or ".") / "torchrun"
        try:
            fd = os.open(candidate, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            first = fh.readline(4096)
        if first.startswith(b"#!"):
            words = first[2:].decode(errors="replace").split()
            if words and os.path.isabs(words[0]) and executable_as_user(words[0]):
                return words[0]
    return executable_on_path("python3", path)


def executable_on_path(name: str, path: str) -> str | None:
    """The first `name` on `path` that is a regular file the effective user may run
    (call it as the job's user, Identity.entered); None when there is none."""
    for directory in path.split(os.pathsep):
        candidate = Path(directory or ".") / name
        if candidate.is_file() and executable_as_user(str(candidate)):
            return str(candidate)
    return None


def executable_as_user(path: str) -> bool:
    """Whether the effective user (the job's, inside Identity.entered) may run `path`:
    access(2) alone asks for the real user, root, who may run nearly anything."""
    return os.access(path, os.X_OK, effective_ids=os.access in os.supports_effective_ids)


def store_argv(python: str, addr: str, port: int) -> list[str]:
    """The store host's command line."""
    return [python, "-c", STORE_SOURCE, addr, str(port)]


def wait_listening(addr: str, port: int, pid: int, timeout: float = STORE_READY_S) -> bool:
    """Whether the store host `pid` listens on addr:port within `timeout` seconds;
    False once it has exited (it could not start: no torch, the port taken)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return False
        if done:
            return False
        try:
            with socket.create_connection((addr, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


def torchelastic_environment(env: dict[str, str]) -> None:
    """Podium's settings for a TorchElastic job's tasks, added to `env` where the job's
    own environment does not set them (see the module's docstring)."""
    env.setdefault(NO_SHARED_STORE, "1")
    env.setdefault(RDZV_CONF_ENV, KEEP_ALIVE)


__all__ = [
    "NO_SHARED_STORE",
    "executable_as_user",
    "executable_on_path",
    "launches_torchelastic",
    "store_argv",
    "store_interpreter",
    "torchelastic_environment",
    "wait_listening",
]
