"""Integration fixtures: a real daemon in a temporary PODIUM_HOME, driven by the CLI and API."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from podium.api.states import TERMINAL_STATES
from tests.integration.slurm_cluster import SlurmCluster, start_cluster
from tests.polling import poll, wait_until

BIN = Path(sys.executable).parent
PODIUM = str(BIN / "podium")
TERMINAL = TERMINAL_STATES

CONFIG = """\
node:
  name: node0
  cpus: {cpus}
  memory_mb: 16000
  gpus: {{source: declared, count: {gpus}, type: h100, memory_mb: 81920}}
partitions:
  - {{name: main, default: true}}
  - {{name: short, max_time: "00:10:00"}}
kill_wait_s: {kill_wait}
scheduler_interval_s: 0.2
"""

pytestmark = pytest.mark.integration


class Cluster:
    """A running Podium daemon for one test (or module)."""

    def __init__(self, home: Path, work: Path) -> None:
        self.home = home
        self.work = work
        self.env = dict(os.environ, PODIUM_HOME=str(home), PATH=f"{BIN}:{os.environ['PATH']}")
        self.daemon_pid: int | None = None

    # -- daemon ------------------------------------------------------------------

    def start(self, *extra: str) -> None:
        result = self.cli("up", *extra)
        assert result.returncode == 0, result.stderr
        self.daemon_pid = int((self.home / "podiumd.pid").read_text())

    def stop(self) -> None:
        if (self.home / "podium.sock").exists():
            self.cli("down", check=False)
        self.daemon_pid = None

    def kill9(self) -> None:
        assert self.daemon_pid is not None
        pid = self.daemon_pid
        os.kill(pid, signal.SIGKILL)

        def gone() -> bool:
            _reap(pid)
            return not Path(f"/proc/{pid}").exists()

        wait_until(gone, f"the daemon (pid {pid}) to die of SIGKILL", 10)
        self.daemon_pid = None

    def alive(self) -> bool:
        with self.api() as api:
            return bool(api.get("/v1/ping").status_code == 200)

    # -- clients -----------------------------------------------------------------

    def cli(
        self,
        *args: str,
        check: bool = False,
        cwd: Path | None = None,
        stdin: str | None = None,
        user: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [PODIUM, *args],
            capture_output=True,
            text=True,
            cwd=cwd or self.work,
            env=env or self.env,
            input=stdin if stdin is not None else "",
            timeout=timeout,
            user=user,
        )
        if check:
            assert result.returncode == 0, f"podium {' '.join(args)}: {result.stderr}"
        return result

    def api(self) -> httpx.Client:
        transport = httpx.HTTPTransport(uds=str(self.home / "podium.sock"))
        return httpx.Client(transport=transport, base_url="http://podium", timeout=30)

    def submit(self, *args: str, cwd: Path | None = None) -> int:
        result = self.cli("submit", "--parsable", *args, cwd=cwd)
        assert result.returncode == 0, result.stderr
        return int(result.stdout.strip())

    def script(self, body: str, name: str = "job.sh") -> Path:
        path = self.work / name
        path.write_text("#!/bin/bash\n" + body.lstrip("\n"))
        return path

    def job(self, job_id: int) -> dict[str, Any]:
        result = self.cli("show", str(job_id), "--json", check=True)
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    def checkpoints(self, job_id: int) -> list[float]:
        """When the daemon noted each of the job's checkpoints (its `checkpoint` events:
        files it sampled, or `podium checkpoint` reports)."""
        with self.api() as api:
            events = api.get(f"/v1/jobs/{job_id}").json()["events"]
        return [e["time"] for e in events if e["kind"] == "checkpoint"]

    def wait(
        self, job_id: int, states: set[str] | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        states = states or TERMINAL
        with self.api() as api:
            job: dict[str, Any] = poll(
                lambda: api.get(f"/v1/jobs/{job_id}").json(),
                lambda job: job["state"] in states,
                f"job {job_id} never {'/'.join(sorted(states))}", timeout, every=0.05,
            )  # fmt: skip
        return job

    def wait_array(self, array_id: int, tasks: int, timeout: float = 60) -> dict[int, Any]:
        """Wait until `tasks` tasks of array `array_id` have ended (each its own record
        once it started: the array's record holds those that have not); by index."""

        def ended() -> dict[int, Any]:
            jobs = api.get("/v1/jobs", params={"all": "true"}).json()["jobs"]
            return {
                j["array_task_id"]: j
                for j in jobs
                if j["array_job_id"] == array_id
                and j["array_task_id"] is not None
                and j["state"] in TERMINAL
            }

        with self.api() as api:
            return poll(
                ended, lambda done: len(done) >= tasks,
                f"array {array_id}: {tasks} tasks ended", timeout, every=0.05,
            )  # fmt: skip

    def wait_reason(self, job_id: int, reason: str, timeout: float = 30) -> dict[str, Any]:
        """Wait until a pass gives the pending job `job_id` this reason (passes follow
        changes: no fixed sleep guesses when one has run)."""
        with self.api() as api:
            job: dict[str, Any] = poll(
                lambda: api.get(f"/v1/jobs/{job_id}").json(),
                lambda job: job["reason"] == reason,
                f"job {job_id} never pending for {reason}", timeout, every=0.05,
            )  # fmt: skip
        return job


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def make_cluster(gpus: int = 4, cpus: int = 8, kill_wait: float = 1.0, extra: str = "") -> Cluster:
    home = Path(tempfile.mkdtemp(prefix="podium-test-", dir="/tmp"))
    home.chmod(0o755)
    work = home / "work"
    work.mkdir()
    work.chmod(0o777)
    (home / "cluster.yaml").write_text(
        CONFIG.format(gpus=gpus, cpus=cpus, kill_wait=kill_wait) + extra
    )
    return Cluster(home, work)


def qos_trio_behind_a_blocker(c: Cluster) -> tuple[int, int, int]:
    """A 4-GPU job running until `open_the_blocker`, then, waiting behind it, a low-QoS
    2-GPU job, a normal 4-GPU one and a high-QoS 2-GPU one, in that submit order: their
    ids (the queue-order tests of multifactor priority and of least attained service).
    A gate, not a time: three submissions on a loaded machine took longer than 5 s."""
    gate = c.work / "blocker-open"
    blocker = c.submit("--gpus=4", "--wrap", f"while [ ! -e {gate} ]; do sleep 0.1; done")
    c.wait(blocker, {"RUNNING"})
    low = c.submit("--qos=low", "--gpus=2", "--wrap", "sleep 0.5")
    normal = c.submit("--gpus=4", "--wrap", "sleep 0.5")
    high = c.submit("--qos=high", "--gpus=2", "--wrap", "sleep 0.5")
    return low, normal, high


def open_the_blocker(c: Cluster) -> None:
    """End `qos_trio_behind_a_blocker`'s blocker."""
    (c.work / "blocker-open").touch()


def mail_recorder(cluster: Cluster, line: str = '"$@"') -> Path:
    """Configure (before start) a mail_command that appends `echo LINE` to a log in the
    work directory, where any user may run it; return the log's path."""
    recorder = cluster.work / "mail.sh"
    log = cluster.work / "mail.log"
    recorder.write_text(f"#!/bin/sh\necho {line} >> {log}\n")
    recorder.chmod(0o755)
    with open(cluster.home / "cluster.yaml", "a") as fh:
        fh.write(f"mail_command: {recorder}\n")
    return log


def _job_dirs(jobs: Path) -> list[Path]:
    """The job directories under `jobs`; none once the daemon has removed them (the
    tmpfs job state goes with `podium down` once no job runs, between any two looks)."""
    try:
        return list(jobs.iterdir())
    except FileNotFoundError:
        return []


def teardown_cluster(cluster: Cluster) -> None:
    """Stop the daemon, then every supervisor it left (found by their job directories)."""
    cluster.stop()
    jobs = cluster.home / "jobs"
    for job_dir in _job_dirs(jobs):
        started = job_dir / "started.json"
        if started.exists() and not (job_dir / "result.json").exists():
            with contextlib.suppress(ProcessLookupError, ValueError, KeyError, OSError):
                os.kill(json.loads(started.read_text())["pid"], signal.SIGTERM)

    def ended() -> bool:
        return not any(
            (d / "started.json").exists() and not (d / "result.json").exists()
            for d in _job_dirs(jobs)
        )

    with contextlib.suppress(AssertionError):  # best effort: the directory goes anyway
        wait_until(ended, "the supervisors it left to end", 10)
    if jobs.is_symlink():  # the job state on a tmpfs (podium.run.rundir)
        shutil.rmtree(jobs.resolve(), ignore_errors=True)
    shutil.rmtree(cluster.home, ignore_errors=True)


def health_cluster(extra: str = "", recovery: str = "automatic") -> Cluster:
    """A cluster of 4 declared GPUs whose health agent follows its own kernel log
    (quick checks every 0.2 s, automatic recovery unless `recovery` says otherwise)."""
    c = make_cluster(gpus=4, cpus=8)
    kern = c.home / "kern.log"
    kern.write_text("")
    (c.home / "cluster.yaml").write_text(
        (c.home / "cluster.yaml").read_text()
        + f"health:\n  kernel_log: {kern}\n  interval_s: 0.2\n  recovery: {recovery}\n"
        + "  retry_s: 1\n  deep_interval_s: 100000\n  burn_in_seconds: 0.1\n"
        + f"  disk_paths: [{c.home}]\n  max_disk_used_percent: 100\n"
        + extra
    )
    return c


@pytest.fixture
def make() -> Iterator[Callable[..., Cluster]]:
    """Starts `health_cluster`s for a test, and tears each down after it."""
    made: list[Cluster] = []

    def factory(extra: str = "", recovery: str = "automatic") -> Cluster:
        c = health_cluster(extra, recovery)
        c.start()
        made.append(c)
        return c

    yield factory
    for c in made:
        teardown_cluster(c)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A fresh daemon with 4 declared H100s and 8 CPUs."""
    c = make_cluster()
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


@pytest.fixture(scope="module")
def shared_cluster() -> Iterator[Cluster]:
    """One daemon shared by a module's tests (they must not depend on each other's jobs)."""
    c = make_cluster(gpus=4, cpus=64)
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


class _SharedSlurm:
    """The Slurm cluster of hosts a run of modules shares, started when the first of
    them needs it and stopped as soon as the worker's next test does not: an idle
    cluster is not free (each node runs Podium's HealthCheckProgram every 10 s)."""

    def __init__(self) -> None:
        self._running: Iterator[SlurmCluster] | None = None
        self.cluster: SlurmCluster | None = None

    def get(self) -> SlurmCluster:
        if self.cluster is None:
            running = start_cluster(hosts=True)
            self.cluster = next(running)  # pytest.skip()s where Slurm cannot run
            self._running = running
        return self.cluster

    def stop(self) -> None:
        running, self._running, self.cluster = self._running, None, None
        if running is not None:
            next(running, None)  # start_cluster's teardown: down.sh, then the check


_shared_slurm = _SharedSlurm()


@pytest.fixture(scope="module")
def slurm_hosts() -> SlurmCluster:
    """One Slurm cluster of hosts (a network, UTS and mount namespace per node) for the
    modules whose tests leave its nodes in service (test_slurm, test_slurm_state_dir;
    test_slurm_yardstick, test_slurm_script_kinds, test_slurm_replace), each starting
    from `in_service`. Their xdist groups (slurm-hosts-1, -2) run each group's modules
    back to back in one worker, which starts the cluster once (in its own ports and
    namespaces, tests.workers) and stops it after the group. The accounting cluster
    (test_slurm_teams) is another: slurmdbd changes what every submission may do."""
    return _shared_slurm.get()


@pytest.hookimpl(trylast=True)  # after the module fixtures' own teardown
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if "slurm_hosts" in getattr(item, "fixturenames", ()) and (
        nextitem is None or "slurm_hosts" not in getattr(nextitem, "fixturenames", ())
    ):
        _shared_slurm.stop()
