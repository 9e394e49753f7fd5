"""Smaller holes a hostile user or a careless environment found (issue 26): each test
plays the attack or the defect as it was reported, against a real root daemon and a
real second Unix user."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from podium.cli.inject import xid_line
from tests.integration.conftest import Cluster, health_cluster, make_cluster, teardown_cluster
from tests.integration.http_wire import read_message
from tests.integration.test_permissions import _python, _run, _user_env, as_login, other_user
from tests.integration.test_resiliency import gpu_health, nodes, until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest

OLD_DEBUG_DIR = Path("/tmp/suplogs")  # where a removed debug switch copied logs as root


def test_no_debug_switch_makes_root_write_where_a_user_points(
    other_user: str, tmp_path: Path
) -> None:
    """Item 3: with PODIUM_KEEP_LOGS set, the daemon copied each job's supervisor log
    as root to /tmp/suplogs/ID.log, through links a user had planted there."""
    if OLD_DEBUG_DIR.exists() or OLD_DEBUG_DIR.is_symlink():
        pytest.skip(f"{OLD_DEBUG_DIR} exists already: not this test's to plant")
    victim = tmp_path / "root-owned"
    victim.write_text("precious\n")
    subprocess.run(["mkdir", str(OLD_DEBUG_DIR)], check=True, **as_login(other_user))
    try:
        for job_id in range(1, 6):
            subprocess.run(["ln", "-s", str(victim), str(OLD_DEBUG_DIR / f"{job_id}.log")],
                           check=True, **as_login(other_user))  # fmt: skip
        c = make_cluster()
        c.env["PODIUM_KEEP_LOGS"] = "1"
        c.start()
        try:
            for _ in range(3):
                done = _run(c, other_user, "submit", "--parsable", "--wrap", "true")
                assert c.wait(int(done.stdout))["state"] == "COMPLETED"
            c.stop()  # the daemon forgets ended runs' directories at the latest here
        finally:
            teardown_cluster(c)
        assert victim.read_text() == "precious\n"
        assert sorted(p.name for p in OLD_DEBUG_DIR.iterdir()) == [f"{i}.log" for i in range(1, 6)]
    finally:
        shutil.rmtree(OLD_DEBUG_DIR, ignore_errors=True)
        assert not os.path.lexists(OLD_DEBUG_DIR)


class LossyProxy:
    """A socket in front of a daemon's that loses the answer to the first request (the
    daemon has carried it out), then is gone for `away_s` (a restarting daemon: no
    socket), then relays faithfully; with `away_s` None it never comes back."""

    def __init__(self, daemon: Path, home: Path, away_s: float | None) -> None:
        self.daemon, self.path, self.away_s = str(daemon), str(home / "podium.sock"), away_s
        self.forwarded = 0
        self._listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _listen(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)

    def _relay(self, request: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as up:
            up.connect(self.daemon)
            up.sendall(request)
            self.forwarded += 1
            return read_message(up)

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            self._relay(read_message(conn))  # carried out; the answer is lost
        os.unlink(self.path)
        self.sock.close()
        if self.away_s is None:
            return
        time.sleep(self.away_s)
        self._listen()
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                while request := read_message(conn):
                    conn.sendall(self._relay(request))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


@pytest.mark.parametrize("away_s", [3.0, None])
def test_a_submit_whose_answer_is_lost_across_a_restart_runs_once(
    cluster: Cluster, tmp_path: Path, away_s: float | None
) -> None:
    """Item 6: the client keeps its submission's key and sends it again until the
    daemon answers (then it gets the job the first attempt made), or says in one line
    that the job may have been accepted."""
    c = cluster
    proxy = LossyProxy(c.home / "podium.sock", tmp_path, away_s)
    env = dict(c.env, PODIUM_HOME=str(tmp_path), PODIUM_RETRY_S="8")
    try:
        done = c.cli("submit", "--parsable", "-J", "once", "--wrap", "true", env=env)
    finally:
        proxy.close()
    jobs = [j for j in json.loads(c.cli("queue", "--all", "--json").stdout) if j["name"] == "once"]
    assert len(jobs) == 1, jobs  # never twice
    if away_s is not None:
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) == jobs[0]["job_id"] and proxy.forwarded >= 2
    else:
        assert done.returncode == 1 and done.stderr.count("\n") == 1
        assert "it may have been carried out; for a submit, check `podium queue`" in done.stderr


def test_the_api_fuzz_run_finds_no_server_error(other_user: str) -> None:
    """Item 7: schemathesis' cases for every route, valid and invalid, plus malformed
    bodies, paths and methods, as root and as a second user: no 5xx, every error in
    Podium's shape (`python -m tests.api_fuzz` runs it larger)."""
    from tests import api_fuzz

    report = api_fuzz.run(examples=10, seed=26, user=other_user)
    assert not report.failures, "\n".join(report.failures[:20])
    assert report.sent > 500 and 403 in report.statuses  # the second user was refused


def _api_as(c: Cluster, user: str, method: str, path: str, body: object) -> tuple[int, Any]:
    """One request to the daemon as `user`, in a process of that user's (the body on
    its standard input)."""
    code = f"""
import json, sys, httpx
t = httpx.HTTPTransport(uds={str(c.home / "podium.sock")!r})
with httpx.Client(transport=t, base_url="http://podium", timeout=60) as cl:
    r = cl.request({method!r}, {path!r}, content=sys.stdin.buffer.read(),
                   headers={{"Content-Type": "application/json"}})
print(json.dumps([r.status_code, r.json()]))
"""
    done = subprocess.run(
        [_python[0], "-c", code], input=json.dumps(body), capture_output=True, text=True,
        cwd="/", timeout=60, env=_user_env(c, user), **as_login(user),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status, answer = json.loads(done.stdout)
    return status, answer


def test_submissions_are_bounded_and_checked_where_they_run(
    cluster: Cluster, other_user: str
) -> None:
    """Item 9: a working directory the user cannot enter, a 100,000-variable
    environment and a 10 MB --wrap are refused at submit in one line."""
    c = cluster
    base = {"wrap": "true", "options": [], "cwd": str(c.work), "environment": {}}
    cases = {
        "/root": (dict(base, cwd="/root"), "/root: permission denied (you cannot enter it)"),
        "env": (
            dict(base, environment={f"V{i}": "x" * 20 for i in range(100_000)}),
            "a job's environment may be at most 1048576 bytes",
        ),
        "wrap": (dict(base, wrap="echo " + "x" * (5 << 20)), "--wrap is 5242885 bytes: at most"),
        "arg": (dict(base, options=["--comment", "y" * (200 << 10)]), "at most 131072"),
        # past the route's body cap, refused before the body is read (issue 43)
        "body": (dict(base, wrap="echo " + "x" * (10 << 20)), "larger than the 10 MiB"),
    }
    for what, (body, why) in cases.items():
        status, answer = _api_as(c, other_user, "POST", "/v1/jobs", body)
        assert status == (413 if what == "body" else 400) and why in answer["error"], (what, answer)
        assert "\n" not in answer["error"]
    status, answer = _api_as(c, other_user, "POST", "/v1/jobs", base)
    assert status == 200, answer
    assert c.wait(answer["jobs"][0]["job_id"])["state"] == "COMPLETED"
    refused = _run(c, other_user, "drain", "node0", "--reason", "mine")
    assert refused.returncode == 1
    assert "is for the administrator (root); you are podium-test" in refused.stderr


def test_an_xid_for_one_daemons_declared_gpu_fences_no_other_daemons() -> None:
    """Item 10: two clusters of declared GPUs on one machine read one kernel log (as
    /dev/kmsg is one); an Xid written for cluster A's GPU 0 fences it and nothing of B,
    and an Xid of a real GPU (domain 0000) fences neither."""
    a, b = health_cluster(), health_cluster()
    config = (b.home / "cluster.yaml").read_text()  # B reads A's log, as both would kmsg
    (b.home / "cluster.yaml").write_text(
        config.replace(f"kernel_log: {b.home / 'kern.log'}", f"kernel_log: {a.home / 'kern.log'}")
    )
    try:
        a.start()
        b.start()
        ids = {c.home: nodes(c)["gpus"][0]["bus_id"] for c in (a, b)}
        assert len(set(ids.values())) == 2 and not any(i.startswith("0000:") for i in ids.values())
        with open(a.home / "kern.log", "a") as fh:
            fh.write(xid_line("0000:00:00", 79, 100.0))  # a real GPU's, on no cluster here
        a.cli("inject", "xid", "--gpu", "0", "--code", "79", check=True)
        until(lambda: gpu_health(a, 0)["fenced"], what="A's GPU 0 to be fenced")
        time.sleep(1.5)  # several of B's health intervals (0.2 s)
        assert not gpu_health(b, 0)["fenced"] and gpu_health(b, 0)["label"] == "schedulable"
        assert all(not gpu_health(a, g)["fenced"] for g in (1, 2, 3))
    finally:
        teardown_cluster(b)
        teardown_cluster(a)
