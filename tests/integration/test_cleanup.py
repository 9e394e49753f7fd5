"""When a job ends, none of its processes survives (real processes, real signals)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration

# Each pattern leaves a process behind that writes its pid to a file, then lingers.
STUBBORN_GRANDCHILD = (
    "(trap '' TERM; echo $BASHPID > {pids}/stubborn; while true; do sleep 0.1; done) &"
)
OWN_SESSION = "setsid bash -c 'echo $$ > {pids}/session; exec sleep 300' &"
DOUBLE_FORK = "( ( echo $BASHPID > {pids}/orphan; exec sleep 300 ) & ) &"
NOHUP = (
    'nohup bash -c \'trap "" TERM HUP; echo $$ > {pids}/nohup; '
    "while true; do sleep 0.1; done' >/dev/null 2>&1 &"
)


def _pids(pids_dir: Path, names: list[str], timeout: float = 10) -> dict[str, int]:
    found = {n: (pids_dir / n) for n in names}
    poll(lambda: [p.read_text().strip() if p.exists() else "" for p in found.values()], all,
         "the leftover processes to start", timeout)  # fmt: skip
    return {n: int(p.read_text()) for n, p in found.items()}


def _gone(pid: int, timeout: float = 5) -> bool:
    """Whether `pid` is gone (or a zombie) within `timeout` seconds."""

    def dead() -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    try:
        wait_until(dead, f"pid {pid} to be gone", timeout)
    except AssertionError:
        return False
    return True


def _body(pids: Path, finish: str) -> str:
    lines = [p.format(pids=pids) for p in (STUBBORN_GRANDCHILD, OWN_SESSION, DOUBLE_FORK, NOHUP)]
    return "\n".join(lines) + "\n" + finish + "\n"


NAMES = ["stubborn", "session", "orphan", "nohup"]


@pytest.fixture(params=["auto", "subreaper"])
def tracked_cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """A cluster per process-tracking mode: cgroup v2 + subreaper (auto, as root) or
    subreaper tracking alone (what an unprivileged daemon gets)."""
    c = make_cluster(extra=f"proctrack: {request.param}\n")
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


@pytest.mark.parametrize("ending", ["normal", "cancel", "timeout"])
def test_no_process_survives_the_job(tracked_cluster: Cluster, ending: str) -> None:
    c = tracked_cluster
    pids_dir = c.work / f"pids-{ending}"
    pids_dir.mkdir()
    finish = {"normal": "sleep 1; exit 0", "cancel": "sleep 300", "timeout": "sleep 300"}[ending]
    script = c.script(_body(pids_dir, finish), f"leaky-{ending}.sh")
    args = ["--time=0:03"] if ending == "timeout" else []
    job_id = c.submit(*args, str(script))
    pids = _pids(pids_dir, NAMES)
    for pid in pids.values():
        assert psutil.pid_exists(pid)
    if ending == "cancel":
        c.cli("cancel", str(job_id), check=True)
    job = c.wait(job_id, timeout=30)
    expected = {"normal": "COMPLETED", "cancel": "CANCELLED", "timeout": "TIMEOUT"}[ending]
    assert job["state"] == expected
    survivors = {name: pid for name, pid in pids.items() if not _gone(pid)}
    assert survivors == {}


def test_proctrack_cgroup_uses_a_job_cgroup(cluster: Cluster) -> None:
    """As root with cgroup v2, each job's processes sit in their own cgroup."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    if os.geteuid() != 0 or not any(
        len(line.split()) > 2 and line.split()[2] == "cgroup2" for line in mounts
    ):
        pytest.skip("needs root and a cgroup v2 mount")
    c = cluster
    job_id = c.submit("-o", "cg-%j.out", "--wrap", "cat /proc/self/cgroup")
    c.wait(job_id)
    text = (c.work / f"cg-{job_id}.out").read_text()
    assert f"podium-job-{job_id}-" in text
