"""The servers the replica keeper runs for a job on a stack with membership of its own
(`replica_keeper`, docs/resiliency.md): torchft's lighthouse (--torchft) and
TorchElastic's c10d rendezvous store (a script that runs `torchrun`), each on the batch
node, as the job's user (the keeper's own identity), listening before any replica
starts. Standard library only: it runs on the batch node.

Where one cannot start, the log says why and the job runs as without it: torchft's
groups find the lighthouse the job's environment names; TorchElastic's first agent
hosts the store, so a fault on its node ends the rendezvous for all.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from podium.backends.slurm.keeper_parts import address
from podium.run.torchelastic import store_argv, store_interpreter, wait_listening
from podium.run.torchft import LIGHTHOUSE, lighthouse_argv, lighthouse_binary

STACKS = ("torchelastic", "torchft")  # the keeper's PODIUM_STACK values besides ""


def start_lighthouse(host: str) -> tuple[subprocess.Popen[bytes] | None, str]:
    """torchft_lighthouse (from the job's PATH) bound to `host` at a free port: the
    process and its URL; (None, "") where it cannot start."""
    binary = lighthouse_binary(os.environ.get("PATH", ""))
    if binary is None:
        print(f"podium: no {LIGHTHOUSE} on the job's PATH: lighthouse not run", file=sys.stderr)
        return None, ""
    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    proc = _serve(lighthouse_argv(binary, port, host), host, port)
    return (proc, f"http://{host}:{port}") if proc is not None else (None, "")


def start_store(host: str, port: int) -> subprocess.Popen[bytes] | None:
    """TorchElastic's c10d store at host:`port`, under the Python the job's `torchrun`
    runs under; None where it cannot start."""
    python = store_interpreter(os.environ.get("PATH", ""))
    if python is None:
        print("podium: no python3 or torchrun on the job's PATH: the rendezvous store is "
              "the first agent's", file=sys.stderr)  # fmt: skip
        return None
    return _serve(store_argv(python, host, port), host, port)


def _serve(argv: list[str], host: str, port: int) -> subprocess.Popen[bytes] | None:
    """`argv` in a session of its own, once it listens at host:port; else None (and the
    log says so)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
    )
    if wait_listening(host, port, proc.pid):
        return proc
    print(f"podium: {argv[0]} did not listen on {host}:{port}", file=sys.stderr)
    proc.kill()
    proc.wait()
    return None


def batch_host() -> str:
    """This (the batch) node's address, as the other nodes reach it."""
    return address(os.environ.get("SLURMD_NODENAME") or socket.gethostname())


__all__ = ["STACKS", "batch_host", "start_lighthouse", "start_store"]
