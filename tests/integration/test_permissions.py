"""Identity from the socket's peer credentials: a second Unix user, created by the test.

Needs root (to create the user and to run a multi-user daemon); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import pwd
import site
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import podium
from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_cleanup import NAMES, _body, _gone, _pids
from tests.workers import ensure_user

pytestmark = pytest.mark.integration

USER = "podium-test"


# The second user needs an interpreter it may execute: ours may live under /root.
# A system Python of the same minor version can load our site-packages (same ABI).
PYTHON_CANDIDATES = [
    sys.executable,
    f"/usr/bin/python3.{sys.version_info.minor}",
    f"/usr/local/bin/python3.{sys.version_info.minor}",
]
PYTHONPATH = os.pathsep.join(
    [str(Path(podium.__file__).resolve().parent.parent), *site.getsitepackages()]
)
_python: list[str] = []


@pytest.fixture(scope="session")  # the user stays: every module of every worker uses it
def other_user() -> str:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second Unix user")
    ensure_user(USER)
    for candidate in PYTHON_CANDIDATES:
        try:
            probe = subprocess.run(
                [candidate, "-c", "import podium.cli.main, podium.server.daemon"],
                **as_login(USER),
                capture_output=True,
                env={"HOME": "/tmp", "PYTHONPATH": PYTHONPATH},
                cwd="/",
            )
        except OSError:
            continue
        if probe.returncode == 0:
            _python[:] = [candidate]
            return USER
    pytest.skip(
        f"no Python {sys.version_info.major}.{sys.version_info.minor} that {USER} "
        f"may run with this checkout's packages (tried {PYTHON_CANDIDATES})"
    )


def as_login(user: str) -> dict[str, Any]:
    """subprocess arguments that run a command as `user` logs in: its uid, its primary
    group and its own supplementary groups (never the test's, which are root's)."""
    entry = pwd.getpwnam(user)
    return {
        "user": entry.pw_uid,
        "group": entry.pw_gid,
        "extra_groups": os.getgrouplist(user, entry.pw_gid),
    }


def _user_env(c: Cluster, user: str) -> dict[str, str]:
    return dict(c.env, HOME="/tmp", USER=user, LOGNAME=user, PYTHONPATH=PYTHONPATH)


def _run(c: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`podium ARGS` run by `user` with an interpreter that user may execute."""
    return subprocess.run(
        [_python[0], "-m", "podium", *args],
        capture_output=True,
        text=True,
        cwd=c.work,
        env=_user_env(c, user),
        **as_login(user),
        timeout=60,
        input="",
    )


def _as(c: Cluster, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(c, user, *args)


def test_jobs_run_as_the_submitting_user(cluster: Cluster, other_user: str) -> None:
    c = cluster
    result = _as(
        c, other_user, "submit", "--parsable", "-o", "who-%u-%j.out", "--wrap", "id -un; id -u"
    )
    assert result.returncode == 0, result.stderr
    job_id = int(result.stdout)
    job = c.wait(job_id)
    assert job["user"] == other_user and job["state"] == "COMPLETED"
    out = c.work / f"who-{other_user}-{job_id}.out"
    entry = pwd.getpwnam(other_user)
    assert out.read_text().split() == [other_user, str(entry.pw_uid)]
    assert out.stat().st_uid == entry.pw_uid


def test_users_act_only_on_their_own_jobs(cluster: Cluster, other_user: str) -> None:
    c = cluster
    roots = c.submit("--hold", "--wrap", "true")
    theirs = int(_as(c, other_user, "submit", "--parsable", "--hold", "--wrap", "true").stdout)
    denied = _as(c, other_user, "cancel", str(roots))
    assert denied.returncode == 1 and "belongs to root" in denied.stderr
    assert _as(c, other_user, "release", str(roots)).returncode == 1
    assert _as(c, other_user, "cancel", "--user", "root").returncode == 1
    # their own: allowed; filters without --user only reach their own jobs
    assert _as(c, other_user, "release", str(theirs)).returncode == 0
    assert c.wait(theirs)["state"] == "COMPLETED"
    assert _as(c, other_user, "cancel", "--state", "PENDING").returncode == 0
    assert c.job(roots)["state"] == "PENDING"
    # everyone may look
    listed = json.loads(_as(c, other_user, "queue", "--json").stdout)
    assert roots in {j["job_id"] for j in listed}
    # the admin (root) may act on anyone's
    other = int(_as(c, other_user, "submit", "--parsable", "--hold", "--wrap", "true").stdout)
    assert c.cli("cancel", str(other)).returncode == 0
    assert c.job(other)["state"] == "CANCELLED"
    c.cli("cancel", str(roots), check=True)


def test_admin_commands_are_refused_to_users(cluster: Cluster, other_user: str) -> None:
    c = cluster
    drained = _as(c, other_user, "drain", "node0", "--reason", "mine now")
    assert drained.returncode == 1 and "administrator" in drained.stderr
    stopped = _as(c, other_user, "down")
    assert stopped.returncode == 1
    assert c.alive()
    nodes = json.loads(c.cli("nodes", "--json", check=True).stdout)
    assert nodes[0]["state"] == "idle"


@pytest.fixture
def user_daemon(other_user: str) -> Iterator[Cluster]:
    """A daemon run by the unprivileged user (no cgroup: subreaper tracking only)."""
    c = make_cluster()
    uid = pwd.getpwnam(other_user).pw_uid
    for path in (c.home, c.home / "cluster.yaml"):
        os.chown(path, uid, -1)
    result = _run(c, other_user, "up")
    assert result.returncode == 0, result.stderr
    c.daemon_pid = int((c.home / "podiumd.pid").read_text())
    try:
        yield c
    finally:
        _run(c, other_user, "down")
        teardown_cluster(c)


def test_unprivileged_daemon_serves_only_its_owner(user_daemon: Cluster, other_user: str) -> None:
    c = user_daemon
    refused = c.cli("submit", "--wrap", "true", env=dict(c.env, HOME="/root"))
    assert refused.returncode == 1 and "can run jobs only for" in refused.stderr
    assert psutil.Process(c.daemon_pid).username() == other_user


def test_unprivileged_daemon_still_leaves_no_process(user_daemon: Cluster, other_user: str) -> None:
    c = user_daemon
    pids_dir = c.work / "pids"
    pids_dir.mkdir()
    os.chown(pids_dir, pwd.getpwnam(other_user).pw_uid, -1)
    (c.work / "leaky.sh").write_text("#!/bin/bash\n" + _body(pids_dir, "sleep 300"))
    result = _run(c, other_user, "submit", "--parsable", "leaky.sh")
    assert result.returncode == 0, result.stderr
    job_id = int(result.stdout)
    pids = _pids(pids_dir, NAMES)
    assert _run(c, other_user, "cancel", str(job_id)).returncode == 0
    assert c.wait(job_id, timeout=30)["state"] == "CANCELLED"
    assert {n: p for n, p in pids.items() if not _gone(p)} == {}


def test_slurms_commands_in_a_users_job_act_only_on_that_users_jobs(
    cluster: Cluster, other_user: str
) -> None:
    # Inside a second user's job, scontrol and squeue work as that user: its own job
    # can be read and requeued, root's cannot be requeued.
    c = cluster
    roots = c.submit("-o", "roots-%j.out", "--wrap", "sleep 30")
    c.wait(roots, {"RUNNING"})
    script = c.work / "theirs.sh"
    script.write_text(
        "#!/bin/bash\n"
        'squeue -h -j "$SLURM_JOB_ID" -o "%i %u %t"\n'
        f"scontrol requeue {roots} || echo refused\n"
        'scontrol show job "$SLURM_JOB_ID" | head -n 1\n'
    )
    script.chmod(0o755)
    result = _as(c, other_user, "submit", "--parsable", "-o", "theirs-%j.out", str(script))
    assert result.returncode == 0, result.stderr
    job = int(result.stdout)
    assert c.wait(job)["state"] == "COMPLETED"
    out = (c.work / f"theirs-{job}.out").read_text().splitlines()
    assert out[0] == f"{job} {other_user} R", out
    assert out[1].startswith("scontrol: error: ") and "belongs to root" in out[1], out
    assert out[2:] == ["refused", f"JobId={job} JobName=theirs.sh"], out
    assert c.job(roots)["state"] == "RUNNING" and c.job(roots)["restart_count"] == 0
    c.cli("cancel", str(roots), check=True)


def test_a_user_may_lower_a_time_limit_and_only_an_admin_raise_it(
    cluster: Cluster, other_user: str
) -> None:
    # scontrol update JobId=N TimeLimit=..., as Slurm rules it: the owner lowers, the
    # administrator also raises; a running job's supervisor takes the new limit.
    c = cluster
    script = c.work / "limits.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH -t 10\n"
        'scontrol update JobId="$SLURM_JOB_ID" TimeLimit=20 || echo refused-raise\n'
        'scontrol update JobId="$SLURM_JOB_ID" TimeLimit=-9 && echo lowered\n'
        'scontrol update JobId="$SLURM_JOB_ID" Partition=short || echo refused-field\n'
        'scontrol show job "$SLURM_JOB_ID" | grep -o "TimeLimit=[0-9:]*"\n'
        'scontrol update JobId="$SLURM_JOB_ID" TimeLimit=0:0:3 && echo three-seconds\n'
        "sleep 60\n"
    )
    script.chmod(0o755)
    result = _as(c, other_user, "submit", "--parsable", "-o", "limits-%j.out", str(script))
    assert result.returncode == 0, result.stderr
    job = int(result.stdout)
    done = c.wait(job, timeout=60)
    out = (c.work / f"limits-{job}.out").read_text()
    assert done["state"] == "TIMEOUT" and done["elapsed_s"] < 30, (done, out)
    lines = out.splitlines()
    assert lines[0].startswith("scontrol: error: only an administrator may raise"), out
    assert lines[1:3] == ["refused-raise", "lowered"], out
    assert "update of partition is not supported here: TimeLimit, Nice" in lines[3], out
    assert lines[4:6] == ["refused-field", "TimeLimit=00:01:00"], out
    assert lines[6] == "three-seconds", out
    # root (the admin) raises a pending job's limit; the user's own change is recorded
    held = c.submit("--hold", "-t", "5", "--wrap", "true")
    with c.api() as api:
        reply = api.post(f"/v1/jobs/{held}/time-limit", json={"time_limit_s": 3600})
        assert reply.status_code == 200, reply.text
        assert reply.json()["time_limit_s"] == 3600
        bad = api.post(f"/v1/jobs/{held}/time-limit", json={"time_limit_s": -5})
        assert bad.status_code == 400 and "time_limit_s" in bad.text, bad.text
    events = [e["detail"] for e in c.job(job)["events"] if e["kind"] == "update"]
    assert events == [f"TimeLimit=60s by {other_user}", f"TimeLimit=3s by {other_user}"]
    c.cli("cancel", str(held), check=True)


def test_a_config_or_socket_the_user_may_not_reach_is_one_line(
    cluster: Cluster, other_user: str, tmp_path: Path
) -> None:
    """A cluster config there but unreadable is an error, never a silent fall back to
    the embedded cluster; a daemon whose socket the user may not reach is one line."""
    private = tmp_path / "private.yaml"  # under pytest's root-only tree
    private.write_text("backend: slurm\n")
    env = _user_env(cluster, other_user)
    for extra, message in (
        ({"PODIUM_CONFIG": str(private)}, f"cannot read the cluster config {private}"),
        ({"PODIUM_HOME": str(tmp_path / "home")}, "ermission denied"),
    ):
        for args in (["queue"], ["show", "1"]):
            done = subprocess.run(
                [_python[0], "-m", "podium", *args], capture_output=True, text=True,
                cwd="/tmp", env={**env, **extra}, **as_login(other_user), timeout=60,
            )  # fmt: skip
            assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
            assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
