"""Starting and stopping the daemon: background, foreground (for systemd), config."""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess

import psutil
import pytest

from tests.integration.conftest import PODIUM, make_cluster, teardown_cluster
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_foreground_daemon_serves_and_stops_on_sigterm() -> None:
    c = make_cluster()
    proc = subprocess.Popen(
        [PODIUM, "up", "--foreground"],
        env=c.env,
        cwd=c.work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: (c.home / "podium.sock").exists() or proc.poll() is not None,
                   "the daemon's socket", 30)  # fmt: skip
        assert proc.poll() is None, "the daemon exited"
        assert c.alive()
        job_id = c.submit("--wrap", "sleep 8")
        c.wait(job_id, {"RUNNING"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert not (c.home / "podium.sock").exists()
        started = json.loads((c.home / "jobs" / str(job_id) / "started.json").read_text())
        sup = psutil.Process(started["pid"])  # the job's supervisor, forked warm or cold
        assert "podium.run.supervisor" in " ".join(sup.cmdline())
        assert sup.is_running()  # the job outlived its daemon
        launchers = [  # a warm supervisor shows its launcher's command line
            p
            for p in psutil.process_iter(["cmdline"])
            if "forkserver" in " ".join(p.info["cmdline"] or [])
            and str(c.home) in " ".join(p.info["cmdline"] or [])
            and p.pid != sup.pid
        ]
        assert not launchers  # the daemon's supervisor launcher went with the daemon
        c.start()
        assert c.wait(job_id, timeout=20)["state"] == "COMPLETED"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        teardown_cluster(c)


def test_first_up_writes_the_default_config_and_gpus_flag_does_not() -> None:
    c = make_cluster()
    try:
        (c.home / "cluster.yaml").unlink()
        c.start("--gpus", "2")
        assert not (c.home / "cluster.yaml").exists()
        assert "2 GPUs" in c.cli("up", check=True).stdout  # already up: says so, changes nothing
        c.stop()
        c.start()
        text = (c.home / "cluster.yaml").read_text()
        assert "partitions:" in text and "qos:" in text and "high" in text
    finally:
        teardown_cluster(c)


def test_down_returns_once_the_daemon_has_closed_its_state() -> None:
    """`podium down` waits for the daemon's whole stop, not only for its socket to go:
    when it returns, the jobs directory (no job in it) is gone and the instance lock is
    free, so a `podium up` or a removal of HOME right after cannot race with the daemon
    (CI of stop 58: a test's teardown saw the jobs link vanish under it). The daemon's
    stop is made slow on purpose: its fork server is stopped by SIGSTOP, which the
    daemon waits 5 s for before it kills it."""
    c = make_cluster()
    try:
        c.start()
        assert c.daemon_pid is not None
        servers = [
            p for p in psutil.Process(c.daemon_pid).children()
            if "forkserver" in " ".join(p.cmdline())
        ]  # fmt: skip
        assert len(servers) == 1, servers  # started with the daemon (warm_up)
        servers[0].suspend()
        c.stop()
        assert not (c.home / "podium.sock").exists()
        assert not (c.home / "jobs").is_symlink() and not (c.home / "jobs").exists()
        with open(c.home / "daemon.lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while the daemon holds it
        assert not servers[0].is_running()
    finally:
        teardown_cluster(c)
