"""What the Slurm backend's keepers share (the replica keeper, `replica_keeper`, and the
elastic keeper, `elastic_keeper`): the job's private directory, its running steps, the
nodes' addresses and the ranks' rendezvous ports. Standard library only: they run on
the batch node with the job's user's identity."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from podium.run.owned_dirs import Squatted, new_file, owned_dir


def job_steps(job_id: str) -> list[tuple[str, str]]:
    """(step id, node) of the job's running steps, but its batch and extern steps."""
    try:
        done = subprocess.run(
            ["squeue", "-h", "-s", "-j", job_id, "-o", "%i|%N"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return []
    return numbered_steps(done.stdout)


def numbered_steps(text: str) -> list[tuple[str, str]]:
    """(step id, nodes) from `squeue -h -s -o %i|%N` lines; batch and extern left out."""
    found = []
    for line in text.splitlines():
        step, _, nodes = line.strip().partition("|")
        step_id = step.partition(".")[2]
        if step_id.isdigit():
            found.append((step_id, nodes))
    return found


def address(node: str) -> str:
    """The node's address, as the ranks reach it (its name when it does not resolve)."""
    try:
        return socket.gethostbyname(node)
    except OSError:
        return node


def generation_port(base_port: int, generation: int) -> int:
    """The rendezvous port of a generation of the job's ranks (20000-39999): another
    for each, so that a new world never meets the last one's store."""
    return 20000 + (base_port - 20000 + 1009 * generation) % 20000


def copy_script(path: Path) -> None:
    """The job's script (descriptor 9, as the batch launcher left it) copied to `path`
    (0700), for the steps the keeper starts: a file made new (`new_file`), never one
    that was there, nor a link or FIFO."""
    with open("/dev/fd/9", "rb") as source:
        body = source.read()
    new_file(path.parent, path.name, body, mode=0o700)


def _job_parts(environ: dict[str, str]) -> tuple[Path, tuple[str, str, str]]:
    base = Path(environ.get("PODIUM_STATE_DIR") or "/tmp")
    user = environ.get("SLURM_JOB_USER") or str(os.getuid())
    restart = environ.get("SLURM_RESTART_COUNT") or "0"
    run = f"{environ.get('SLURM_JOB_ID', 'local')}.{restart}"
    return base, (f"user-{user}", "slurm-jobs", run)


def job_dir(environ: dict[str, str]) -> Path:
    """STATE/user-USER/slurm-jobs/JOBID.RESTART: private to the job's user."""
    base, parts = _job_parts(environ)
    return base.joinpath(*parts)


def make_job_dir(environ: dict[str, str]) -> Path:
    """`job_dir`, made where missing, every part checked as the job's user's
    (`owned_dir`: not a link, not another user's, not writable by others). Raises
    Squatted (its message names the path and the fix) or OSError."""
    base, parts = _job_parts(environ)
    return owned_dir(base, parts)


def refuse(exc: OSError) -> int:
    """A keeper that cannot have its job's directory: say why (one line), exit 1."""
    why = str(exc) if isinstance(exc, Squatted) else f"cannot make {exc.filename}: {exc.strerror}"
    print(f"podium: not started: {why}", file=sys.stderr)
    return 1
