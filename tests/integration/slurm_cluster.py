"""A real Slurm test cluster for the integration tests, rendered by `podium slurm render`
and started by scripts/slurm-testbed/up.sh; stopped by down.sh (by pid files only)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from podium.api.states import TERMINAL_STATES
from tests.polling import poll
from tests.workers import port_base as worker_port_base

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "slurm-testbed"
DEFINITION = Path(__file__).with_name("slurm_testbed.yaml")
PODIUM = str(Path(sys.executable).parent / "podium")
TERMINAL = TERMINAL_STATES


def why_no_slurm() -> str | None:
    """The reason Slurm tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (slurmd runs jobs as their users)"
    for tool in ("slurmctld", "slurmd", "munged", "sbatch"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run scripts/slurm-testbed/install.sh)"
    return None


@dataclass
class SlurmCluster:
    directory: Path
    env: dict[str, str]
    port_base: int  # this worker's (tests.workers.port_base): names its links and cgroups

    @property
    def config(self) -> Path:
        return self.directory / "etc" / "podium.yaml"

    def podium(
        self, *args: str, check: bool = True, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [PODIUM, *args], capture_output=True, text=True, env=self.env, cwd=cwd, timeout=120
        )
        if check and done.returncode != 0:
            raise AssertionError(f"podium {' '.join(args)} -> {done.returncode}: {done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.podium(*args, "--json").stdout)

    def scontrol(self, *args: str) -> str:
        return subprocess.run(
            ["scontrol", *args], capture_output=True, text=True, env=self.env, check=True
        ).stdout

    def wait_job(self, job_id: int, states: set[str], timeout: float = 90) -> dict[str, Any]:
        job: dict[str, Any] = poll(
            lambda: self.json("show", str(job_id)), lambda job: job["state"] in states,
            f"job {job_id} never reached {states}", timeout,
        )  # fmt: skip
        return job

    def story(self, job_id: int) -> str:
        """What slurmctld and the slurmds logged about `job_id` (the lines naming it):
        for a failing test's message, where the job's own state says too little."""
        said = re.compile(rf"\b(JobId=|job_id=|job |StepId=){job_id}\b")
        lines = [
            f"{log.name}: {line}"
            for log in sorted((self.directory / "log").glob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if said.search(line)
        ]
        return "\n".join(lines[-60:])

    def node_sh(self, node: str, action: str, *more: str) -> None:
        """scripts/slurm-testbed/node.sh on `node`: a fault (crash, kill, cut, slow
        [RATE]) or its mend (start, join, fast); AssertionError when it fails."""
        done = subprocess.run(
            ["bash", str(SCRIPTS / "node.sh"), str(self.directory), node, action, *more],
            capture_output=True, text=True, env=self.env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    def node(self, name: str) -> dict[str, Any]:
        nodes: list[dict[str, Any]] = self.json("nodes")
        return next(n for n in nodes if n["node"] == name)

    def wait_node(self, name: str, test: Any, timeout: float = 60) -> dict[str, Any]:
        try:
            return poll(lambda: self.node(name), test, f"node {name} never got there", timeout)
        except AssertionError as late:  # what its health hook last said, and slurmd
            from podium.backends.slurm.hook import health_log
            from podium.config.cluster import load_config

            hook = health_log(load_config(self.config))
            said = [x for x in hook.read_text().splitlines() if name in x] if hook.exists() else []
            slurmd = self.directory / "log" / f"slurmd-{name}.log"
            tail = slurmd.read_text(errors="replace").splitlines()[-15:] if slurmd.exists() else []
            raise AssertionError("\n".join([str(late), *said[-5:], *tail])) from None


def why_no_hosts() -> str | None:
    """The reason the hosts layout (a namespace per node) cannot run here, or None."""
    for tool in ("ip", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed: the hosts layout needs iproute2 and util-linux"
    probe = f"pdm-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def why_no_accounting() -> str | None:
    """The reason the test cluster cannot keep accounts (slurmdbd, MariaDB), or None."""
    for tool in ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (run scripts/slurm-testbed/install.sh)"
    return None


def start_cluster(
    port_base: int = 18800,
    hosts: bool = False,
    accounting: bool = False,
    definition: Path = DEFINITION,
) -> Iterator[SlurmCluster]:
    """A running test cluster of `definition`; with `hosts`, each node a host of its
    own (its network, UTS and mount namespaces: hostname, address, /etc/hosts); with
    `accounting`, slurmdbd (over its own MariaDB) keeps associations and slurmctld
    enforces them. `port_base` is the module's nominal base, moved into this xdist
    worker's range (tests.workers)."""
    port_base = worker_port_base(port_base)
    reason = (
        why_no_slurm()
        or (why_no_hosts() if hosts else None)
        or (why_no_accounting() if accounting else None)
    )
    if reason:
        pytest.skip(reason)
    directory = Path(tempfile.mkdtemp(prefix="podium-slurm-"))
    subprocess.run(
        [
            PODIUM,
            "slurm",
            "render",
            str(definition),
            "--testbed",
            str(directory),
            "--port-base",
            str(port_base),
            *(["--hosts"] if hosts else []),
        ],
        check=True,
        capture_output=True,
    )
    up = subprocess.run(
        ["bash", str(SCRIPTS / "up.sh"), str(directory), *(["--accounting"] if accounting else [])],
        capture_output=True,
        text=True,
    )
    if up.returncode != 0:
        raise AssertionError(f"up.sh failed: {up.stderr[-2000:]}")
    env = dict(os.environ)
    env.pop("SLURM_JWT", None)
    env.update(
        PODIUM_CONFIG=str(directory / "etc" / "podium.yaml"),
        SLURM_CONF=str(directory / "etc" / "slurm.conf"),
        PODIUM_HOME=str(directory / "home"),
    )
    try:
        yield SlurmCluster(directory, env, port_base)
    finally:
        subprocess.run(["bash", str(SCRIPTS / "down.sh"), str(directory)], capture_output=True)
        shutil.rmtree(directory, ignore_errors=True)
        if hosts:  # down.sh removed every namespace and link up.sh made
            netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
            links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True)
            left = [w for w in (netns.stdout + links.stdout).split() if f"pdm{port_base}" in w]
            assert not left, f"down.sh left {left}"


def in_service(cluster: SlurmCluster, timeout: float = 60) -> SlurmCluster:
    """`cluster` once no job of an earlier module is left and every node is in service:
    what a module sharing the run's cluster (conftest.py's `slurm_hosts`) starts from.
    A job an earlier module left (a failed test's) is cancelled first, so that one
    failure does not fail every module after it; a node left drained or down fails
    here, by name."""
    for job in cluster.json("queue"):
        cluster.podium("cancel", str(job["job_id"]), check=False)
    poll(lambda: cluster.json("queue"), lambda jobs: not jobs, "the queue to empty", timeout)
    poll(
        lambda: cluster.json("nodes"),
        lambda nodes: all(n["state"] in ("idle", "mixed", "allocated") for n in nodes),
        "every node in service", timeout,
    )  # fmt: skip
    return cluster
