"""A root daemon serving several users: what a hostile second user can and cannot do.

Each test acts as a real second Unix user (created by test_permissions' fixture).
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, mail_recorder, make_cluster, teardown_cluster
from tests.integration.test_permissions import _as, _python, _user_env, as_login, other_user
from tests.polling import wait_until

pytestmark = pytest.mark.integration

__all__ = ["other_user"]  # the fixture, imported for pytest


def _py_as(c: Cluster, user: str, code: str) -> subprocess.CompletedProcess[str]:
    """Run Python `code` as `user`."""
    return subprocess.run(
        [_python[0], "-c", code],
        capture_output=True,
        text=True,
        env=_user_env(c, user),
        **as_login(user),
        cwd="/",
        timeout=30,
    )


def test_mail_user_cannot_become_an_option_and_mail_runs_as_the_user(other_user: str) -> None:
    c = make_cluster()
    log = mail_recorder(c, '"$(id -u) $(id -G) | $*"')
    c.start()
    try:
        bad = _as(
            c, other_user, "submit", "--mail-type=END", "--mail-user=--exec=!id > /tmp/x", "--wrap",
            "true",
        )  # fmt: skip
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1
        assert "expected a user name or an e-mail address" in bad.stderr
        ok = _as(c, other_user, "submit", "--parsable", "--mail-type=END", "--wrap", "true")
        assert ok.returncode == 0, ok.stderr
        job_id = int(ok.stdout)
        c.wait(job_id)
        # the file is made before the line is written: wait for both
        wait_until(lambda: log.exists() and log.read_text().strip(), f"a line in {log}", 10)
        line = log.read_text().strip()
        entry = pwd.getpwnam(other_user)
        ids, _, args = line.partition(" | ")
        uid, *groups = ids.split()
        assert int(uid) == entry.pw_uid
        assert "0" not in groups  # none of root's groups
        assert args.endswith(f"-- {other_user}") and f"job {job_id}" in args
    finally:
        teardown_cluster(c)


def test_state_and_other_users_jobs_are_private(cluster: Cluster, other_user: str) -> None:
    c = cluster
    env = dict(c.env, API_TOKEN="hunter2-secret")
    done = c.cli("submit", "--parsable", "-o", "mine-%j.out", "--wrap", "echo private", env=env)
    job_id = int(done.stdout)
    c.wait(job_id)
    assert (c.home / "podium.db").stat().st_mode & 0o077 == 0
    assert (c.home).stat().st_mode & 0o777 == 0o711
    probe = _py_as(
        c,
        other_user,
        f"""
import os, sys
home = {str(c.home)!r}
found = []
for path in ["podium.db", "podium.db-wal", "podiumd.log", "jobs/{job_id}/launch.json"]:
    try:
        open(os.path.join(home, path), "rb").read()
        found.append(path)
    except FileNotFoundError:
        pass
    except PermissionError:
        pass
try:
    os.listdir(home)
    found.append("listing")
except PermissionError:
    pass
print(" ".join(found))
""",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == ""
    for command in (["show", str(job_id)], ["logs", str(job_id)]):
        refused = _as(c, other_user, *command)
        assert refused.returncode == 1 and "belongs to root" in refused.stderr
        assert "private" not in refused.stdout
    queue = json.loads(_as(c, other_user, "queue", "--all", "--json").stdout)
    assert job_id in {j["job_id"] for j in queue}  # listing stays open, as squeue


def test_output_files_follow_the_submitters_umask(cluster: Cluster, other_user: str) -> None:
    c = cluster
    modes = {}
    for mask in (0o077, 0o022):
        done = subprocess.run(
            [_python[0], "-m", "podium", "submit", "--parsable", "-o", f"um-{mask:o}-%j.out",
             "--wrap", "echo hi"],
            capture_output=True, text=True, env=_user_env(c, other_user), **as_login(other_user),
            cwd=c.work, umask=mask, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        job_id = int(done.stdout)
        c.wait(job_id)
        modes[mask] = (c.work / f"um-{mask:o}-{job_id}.out").stat().st_mode & 0o777
    assert modes == {0o077: 0o600, 0o022: 0o644}


def test_jobs_get_the_users_groups_not_the_daemons(cluster: Cluster, other_user: str) -> None:
    c = cluster
    group_root = c.work / f"gr-{other_user}"
    group_root.mkdir()
    os.chown(group_root, 0, 0)
    group_root.chmod(0o770)  # only root and group root may enter and write here
    refused = _as(c, other_user, "submit", "-o", f"{group_root}/x.out", "--wrap", "true")
    assert refused.returncode == 2 and "permission denied" in refused.stderr
    # With a pattern in the directory the submit check cannot expand it: the supervisor
    # opens the file as the user, with the user's groups, and fails.
    late = _as(c, other_user, "submit", "--parsable", "-o", "gr-%u/x.out", "--wrap", "true")
    assert late.returncode == 0, late.stderr
    job = c.wait(int(late.stdout))
    assert job["state"] == "FAILED" and "Permission denied" in job["reason"]
    assert not (group_root / "x.out").exists()
    done = _as(c, other_user, "submit", "--parsable", "-o", "groups-%j.out", "--wrap", "id -G")
    job_id = int(done.stdout)
    c.wait(job_id)
    groups = (c.work / f"groups-{job_id}.out").read_text().split()
    expected = os.getgrouplist(other_user, pwd.getpwnam(other_user).pw_gid)
    assert sorted(map(int, groups)) == sorted(expected) and "0" not in groups


def test_chdir_reveals_nothing_about_closed_directories(
    cluster: Cluster, other_user: str, tmp_path: Path
) -> None:
    c = cluster
    closed = tmp_path / "closed"
    (closed / "exists").mkdir(parents=True)
    closed.chmod(0o700)
    tmp_path.chmod(0o755)
    answers = []
    for target in ("exists", "absent"):
        done = _as(c, other_user, "submit", f"--chdir={closed}/{target}", "--wrap", "true")
        assert done.returncode == 2
        answers.append(done.stderr.replace(target, "X"))
    assert answers[0] == answers[1] and "is not a directory you can see" in answers[0]


def test_qos_and_accounts_are_enforced_and_shown(other_user: str) -> None:
    c = make_cluster(
        extra=(
            "qos:\n"
            "  - {name: high, priority: 1000, allow_users: [root]}\n"
            "  - {name: normal, priority: 100}\n"
            "accounts:\n"
            f"  - {{name: lab, users: [{{name: {other_user}}}]}}\n"
            "  - {name: ops, users: [{name: root}]}\n"
            f"users:\n  - {{name: {other_user}, default_account: lab}}\n"
        )
    )
    c.start()
    try:
        refused = _as(c, other_user, "submit", "-q", "high", "--wrap", "true")
        assert refused.returncode == 2 and "may not use QoS 'high'" in refused.stderr
        refused = _as(c, other_user, "submit", "--account=ops", "--wrap", "true")
        assert refused.returncode == 2 and "may not charge account 'ops'" in refused.stderr
        ok = _as(c, other_user, "submit", "--parsable", "--hold", "--wrap", "true")
        assert ok.returncode == 0, ok.stderr
        assert c.job(int(ok.stdout))["account"] == "lab"
        shown = _as(c, other_user, "share").stdout
        assert f"you ({other_user}) may charge lab (default lab); QoS: normal" in shown
        c.cli("cancel", ok.stdout.strip(), check=True)
    finally:
        teardown_cluster(c)


def test_control_characters_are_escaped_in_tables(cluster: Cluster) -> None:
    c = cluster
    name = "evil\x1b[2J\x1b[31m[bold]x[/bold]\u202e"
    job_id = c.submit("--hold", "-J", name, "--comment", "\x07bell", "--wrap", "true")
    for command in (["queue"], ["show", str(job_id)]):
        out = c.cli(*command, check=True).stdout
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out
        assert "evil\\x1b[2J\\x1b[31m[bold]x[/bold]\\u202e" in out
    record = json.loads(c.cli("show", str(job_id), "--json", check=True).stdout)
    assert record["name"] == name and record["comment"] == "\x07bell"
    c.cli("cancel", str(job_id), check=True)


def test_with_no_accounts_configured_a_user_charges_only_their_own(
    cluster: Cluster, other_user: str
) -> None:
    """Issue 60, item 7: with `accounts: []` a user charged 100 GPU-seconds to another
    user's account (whose fair share fell from 0.25 to 0.11), and `-A root` passed.
    Now only their own (the default account, their teams') unless open_accounts."""
    c = cluster
    for account in ("root", "someone-else"):
        refused = _as(c, other_user, "submit", f"--account={account}", "--wrap", "true")
        assert refused.returncode == 2, refused.stderr
        assert f"user {other_user} may charge only '{other_user}'" in refused.stderr
        assert "open_accounts: true" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    ok = _as(c, other_user, "submit", "--parsable", "--hold", f"-A{other_user}", "--wrap", "true")
    assert ok.returncode == 0, ok.stderr
    shown = _as(c, other_user, "share").stdout
    assert f"you ({other_user}) may charge {other_user} (default {other_user})" in shown
    mine = c.submit("--hold", "--account=anything", "--wrap", "true")  # an administrator's
    assert c.job(mine)["account"] == "anything"
    c.cli("cancel", ok.stdout.strip(), str(mine), check=True)


def test_open_accounts_lets_a_lab_use_accounts_as_free_labels(other_user: str) -> None:
    c = make_cluster(extra="open_accounts: true\n")
    c.start()
    try:
        ok = _as(c, other_user, "submit", "--parsable", "--hold", "-A", "root", "--wrap", "true")
        assert ok.returncode == 0, ok.stderr
        assert c.job(int(ok.stdout))["account"] == "root"
        assert "may charge any account" in _as(c, other_user, "share").stdout
        c.cli("cancel", ok.stdout.strip(), check=True)
    finally:
        teardown_cluster(c)
