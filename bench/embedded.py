"""A fresh embedded cluster for one benchmark run: `podium up` in a temporary home,
`podium down` and removal at the end."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Self

import httpx

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[1]


def compile_podium() -> None:
    """Write podium's bytecode, as pip does when it installs a package. A benchmark
    that starts many clients must not time them compiling their modules each time
    (an editable install under PYTHONDONTWRITEBYTECODE, as on this project's machines,
    writes none: +18 ms a `podium submit`)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "podium")], check=True)


class EmbeddedCluster:
    """A daemon for HOME/cluster.yaml = `config` (`{home}` in it is replaced)."""

    def __init__(self, config: str, prefix: str = "podium-bench-") -> None:
        self.home = Path(tempfile.mkdtemp(prefix=prefix))
        (self.home / "cluster.yaml").write_text(config.replace("{home}", str(self.home)))
        self.work = self.home / "work"
        self.work.mkdir()
        self.env = dict(os.environ, PODIUM_HOME=str(self.home), PATH=f"{BIN}:{os.environ['PATH']}")

    def __enter__(self) -> Self:
        subprocess.run([str(BIN / "podium"), "up"], env=self.env, check=True, capture_output=True)
        return self

    def __exit__(self, *exc: object) -> None:
        """Cancel what still runs or waits (`podium down` leaves jobs running), wait
        for the runs to end, stop the daemon, remove the home."""
        with self.client() as http:
            http.post("/v1/jobs/cancel", json={"states": ["PENDING", "RUNNING"], "user": None})
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                running = http.get("/v1/jobs", params={"state": "RUNNING"}).json()["jobs"]
                if not running:
                    break
                time.sleep(0.2)
        subprocess.run([str(BIN / "podium"), "down"], env=self.env, capture_output=True)
        jobs = self.home / "jobs"
        if jobs.is_symlink():  # the job state on a tmpfs
            shutil.rmtree(jobs.resolve(), ignore_errors=True)
        shutil.rmtree(self.home, ignore_errors=True)

    def client(self, timeout: float = 120) -> httpx.Client:
        return httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.home / "podium.sock")),
            base_url="http://podium",
            timeout=timeout,
        )


@contextlib.contextmanager
def slurm_testbed(
    yaml_text: str,
    port_base: int,
    extra_conf: str = "",
    settings: Mapping[str, str | None] | None = None,
    spool_on_tmpfs: bool = False,
) -> Iterator[Path]:
    """A real Slurm cluster for one benchmark run: `yaml_text` rendered by `podium slurm
    render --testbed` into a temporary directory (with `extra_conf` lines appended to
    slurm.conf, and each of `settings` replacing that key's line or added; a None
    value removes the key, leaving Slurm's default), started by
    scripts/slurm-testbed/up.sh, stopped and removed after. With `spool_on_tmpfs`,
    each slurmd's spool (SlurmdSpoolDir, where it keeps a job's script and state) is
    on /dev/shm, as Podium keeps its running jobs' state. Yields the directory (its
    etc/slurm.conf, run/*.pid, work/)."""
    directory = Path(tempfile.mkdtemp(prefix="podium-bench-slurm-"))
    spool = Path(tempfile.mkdtemp(prefix="podium-bench-slurm-spool-", dir="/dev/shm"))
    if spool_on_tmpfs:
        settings = {**(settings or {}), "SlurmdSpoolDir": f"{spool}/%n"}
    (directory / "cluster.yaml").write_text(yaml_text)
    subprocess.run(
        [
            *(str(BIN / "podium"), "slurm", "render", str(directory / "cluster.yaml")),
            *("--testbed", str(directory), "--port-base", str(port_base)),
        ],
        check=True,
        capture_output=True,
    )
    conf = directory / "etc" / "slurm.conf"
    text = conf.read_text() + extra_conf
    for key, value in (settings or {}).items():
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key}=")]
        text = "\n".join([*lines, *([f"{key}={value}"] if value is not None else [])]) + "\n"
    conf.write_text(text)
    scripts = Path(__file__).resolve().parents[1] / "scripts" / "slurm-testbed"
    subprocess.run(
        ["bash", str(scripts / "up.sh"), str(directory)], check=True, capture_output=True
    )
    try:
        yield directory
    finally:
        subprocess.run(["bash", str(scripts / "down.sh"), str(directory)], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(spool, ignore_errors=True)


def embedded_config(cpus: int, gpus: int, interval_s: float = 0.2) -> str:
    """A one-node embedded cluster of `cpus` CPUs (1000 MiB each) and `gpus` declared
    H100s, passing every `interval_s` seconds."""
    return (
        f"node: {{name: node0, cpus: {cpus}, memory_mb: {cpus * 1000},\n"
        f"       gpus: {{source: declared, count: {gpus}, type: h100, memory_mb: 81920}}}}\n"
        f"scheduler_interval_s: {interval_s}\nkill_wait_s: 1\n"
    )


def slurm_definition(name: str, nodes: int, cpus: int, gpus: int) -> str:
    """A Slurm test cluster of `nodes` nodes of `cpus` CPUs (1000 MiB each) and `gpus`
    H100s, for `podium slurm render --testbed`; health checks out of the way."""
    return f"""\
ClusterName: {name}
Scheduling:
  SlurmSettings:
    HealthChecks: {{Interval: 300, Prolog: false, Epilog: false}}
  SlurmQueues:
    - Name: main
      Default: true
      ComputeResources:
        - {{Name: g, Cpus: {cpus}, MemoryMiB: {cpus * 1000}, Gpus: {{Count: {gpus}, Type: h100}},
           MinCount: {nodes}, MaxCount: {nodes}}}
"""


# Slurm's own defaults for the scheduler (SchedulerParameters unset: sched_interval=60,
# bf_interval=30, batch_sched_delay=3), against the test bed's quick settings.
SLURM_DEFAULT_SCHEDULER: dict[str, str | None] = {"SchedulerParameters": None}


def slurm_pids(directory: Path) -> dict[str, list[int]]:
    """The test cluster's daemons by name: slurmctld, its slurmds, its private munged,
    and its slurmrestd while `slurmrestd` runs one (none otherwise)."""
    run = directory / "run"
    rest = run / "slurmrestd.pid"
    return {
        "slurmctld": [int((run / "slurmctld.pid").read_text())],
        "slurmd": [int(p.read_text()) for p in sorted(run.glob("slurmd*.pid"))],
        "munged": [int((run / "munged.pid").read_text())],
        "slurmrestd": [int(rest.read_text())] if rest.exists() else [],
    }


def slurmrestd_client(directory: Path) -> httpx.Client:
    """A client of the slurmrestd that `slurmrestd` runs for the cluster at `directory`."""
    sock = directory / "run" / "slurmrestd.sock"
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://slurm", timeout=600
    )


@contextlib.contextmanager
def slurmrestd(directory: Path) -> Iterator[httpx.Client]:
    """Slurm's REST daemon (Debian's `slurmrestd`, openapi/v0.0.38) for the test cluster
    at `directory`, on a unix socket with local authentication (the caller's uid, as
    Podium's socket does); yields a client for it. As root it needs
    SLURMRESTD_SECURITY=disable_user_check."""
    if shutil.which("slurmrestd") is None:
        raise SystemExit("slurmrestd is not installed: apt-get install slurmrestd")
    sock = directory / "run" / "slurmrestd.sock"
    env = dict(
        os.environ,
        SLURM_CONF=str(directory / "etc" / "slurm.conf"),
        SLURMRESTD_SECURITY="disable_user_check",
    )
    log = (directory / "log" / "slurmrestd.log").open("w")
    argv = ["slurmrestd", "-a", "rest_auth/local", "-s", "openapi/v0.0.38", f"unix:{sock}"]
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    pid_file = directory / "run" / "slurmrestd.pid"  # for slurm_pids: this one, no other
    pid_file.write_text(str(proc.pid))
    try:
        deadline = time.monotonic() + 20
        while not sock.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"slurmrestd did not start; see {log.name}")
            time.sleep(0.05)
        with slurmrestd_client(directory) as client:
            yield client
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        pid_file.unlink(missing_ok=True)
        log.close()
