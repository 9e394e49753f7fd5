"""Team quotas on a real Slurm with accounting: `podium slurm teams --apply` makes the
config's teams into associations (slurmdbd over its own MariaDB), and slurmctld holds
each team to its GrpTRES GPU cap: root's jobs under one team's account and a second
Unix user's jobs under another's wait as AssocGrpGRES past the quota, and `podium
teams` shows the use, what waits and the cap Slurm enforces. What Slurm cannot hold
(lending in a cohort, preemption within a team) is refused in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.slurm_cluster import PODIUM, TERMINAL, SlurmCluster, start_cluster
from tests.integration.test_permissions import PYTHONPATH, _python, as_login, other_user
from tests.polling import poll

# One worker runs the "slurm-clusters" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-clusters")]
__all__ = ["other_user"]  # the fixture, used here by name

TEAMS = [
    {"name": "vision", "quota": {"gpus": 2}, "accounts": ["vision"], "weight": 2},
    {"name": "lang", "quota": {"gpus": 4}, "accounts": ["nlp"], "users": ["podium-test"]},
]


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    yield from start_cluster(port_base=19100, accounting=True)


def _config(cluster: SlurmCluster, name: str, **changes: Any) -> Path:
    """The test cluster's Podium config with `changes`, readable by every user."""
    data = yaml.safe_load(cluster.config.read_text())
    data.update(changes)
    path = cluster.directory / "etc" / name
    path.write_text(yaml.safe_dump(data))
    path.chmod(0o644)
    return path


def _sacctmgr(slurm: SlurmCluster, *args: str) -> str:
    return subprocess.run(
        ["sacctmgr", *args], capture_output=True, text=True, env=slurm.env, check=True
    ).stdout


def _as_user(
    slurm: SlurmCluster, user: str, config: Path, work: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """`podium ARGS` run by `user`, as they log in, on this cluster."""
    env = {
        "HOME": str(work),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": PYTHONPATH,
        "PODIUM_CONFIG": str(config),
        "PODIUM_HOME": str(work / "home"),
    }
    return subprocess.run(
        [_python[0], "-m", "podium", *args],
        capture_output=True, text=True, env=env, cwd=work, timeout=120, **as_login(user),
    )  # fmt: skip


def _wait_reason(slurm: SlurmCluster, job_id: int, reason: str) -> dict[str, Any]:
    return poll(
        lambda: slurm.json("show", str(job_id)),
        lambda job: job["state"] == "PENDING" and reason in (job["reason"] or ""),
        f"job {job_id} never waited for {reason}", 60,
    )  # fmt: skip


def _team(rows: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(r for r in rows if r["name"] == name)


def test_teams_become_associations_whose_gpu_caps_slurm_enforces(
    slurm: SlurmCluster, other_user: str, tmp_path: Path
) -> None:
    os.chmod(slurm.directory, 0o755)  # the second user reads the config and Slurm's
    (slurm.directory / "shared" / "podium").chmod(0o1777)
    config = _config(
        slurm,
        "teams.yaml",
        accounts=[{"name": "vision"}, {"name": "nlp"}],
        teams=TEAMS,
        slurm={**yaml.safe_load(slurm.config.read_text())["slurm"], "python": _python[0]},
    )
    # the jobs' Python (one the second user may run too) finds Podium by PYTHONPATH
    env = dict(slurm.env, PODIUM_CONFIG=str(config), PYTHONPATH=PYTHONPATH)
    script = subprocess.run(
        [PODIUM, "slurm", "teams"], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert "set GrpTRES=gres/gpu=2 Fairshare=200" in script, script
    for _ in range(2):  # a second apply changes nothing and does not fail
        applied = subprocess.run(
            [PODIUM, "slurm", "teams", "--apply"], capture_output=True, text=True, env=env
        )
        assert applied.returncode == 0, applied.stderr + applied.stdout
    assert "as is: add account vision" in applied.stdout
    assocs = _sacctmgr(slurm, "-n", "-P", "show", "assoc", "format=account,user,grptres,parentname")
    rows = {tuple(line.split("|")[:2]): line.split("|") for line in assocs.splitlines()}
    assert rows[("vision", "")][2] == "gres/gpu=2" and rows[("lang", "")][2] == "gres/gpu=4"
    assert rows[("nlp", "")][3] == "lang" and ("lang", "podium-test") in rows
    _sacctmgr(slurm, "-i", "add", "user", "root", "account=vision")  # an admin's grant

    def submit(*args: str) -> int:
        done = subprocess.run(
            [PODIUM, "submit", "--parsable", "-o", "/dev/null", *args],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return int(done.stdout)

    mine = [submit("--account=vision", "--gpus=2", "--wrap", "sleep 300") for _ in range(2)]
    work = Path(tempfile.mkdtemp(prefix="podium-team-"))
    os.chown(work, *(as_login(other_user)[k] for k in ("user", "group")))
    theirs = []
    for _ in range(3):  # under their default account: the team's
        done = _as_user(slurm, other_user, config, work, "submit", "--parsable", "--gpus=2",
                        "-o", "/dev/null", "--wrap", "sleep 300")  # fmt: skip
        assert done.returncode == 0, done.stderr
        theirs.append(int(done.stdout))
    try:
        slurm.wait_job(mine[0], {"RUNNING"})
        assert _wait_reason(slurm, mine[1], "AssocGrpGRES")["account"] == "vision"
        for job_id in theirs[:2]:
            assert slurm.wait_job(job_id, {"RUNNING"})["account"] == "lang"
        assert _wait_reason(slurm, theirs[2], "AssocGrpGRES")["user"] == other_user
        seen = _as_user(slurm, other_user, config, work, "teams", "--json")
        assert seen.returncode == 0, seen.stderr
        by_root = subprocess.run([PODIUM, "teams", "--json"], capture_output=True, text=True,
                                 env=env, check=True).stdout  # fmt: skip
        for rows_seen in (yaml.safe_load(by_root), yaml.safe_load(seen.stdout)):
            vision, lang = _team(rows_seen, "vision"), _team(rows_seen, "lang")
            assert (vision["used_gpus"], vision["pending_jobs"], vision["pending_gpus"]) == (
                2, 1, 2)  # fmt: skip
            assert (lang["used_gpus"], lang["pending_jobs"]) == (4, 1)
            assert (vision["enforced_gpus"], lang["enforced_gpus"]) == (2, 4)
        denied = _as_user(slurm, other_user, config, work, "cancel", str(mine[0]))
        assert denied.returncode != 0 and slurm.json("show", str(mine[0]))["state"] == "RUNNING"
    finally:
        for job_id in mine:
            slurm.podium("cancel", str(job_id), check=False)
        for job_id in theirs:
            _as_user(slurm, other_user, config, work, "cancel", str(job_id))
        for job_id in mine + theirs:
            slurm.wait_job(job_id, TERMINAL)
        shutil.rmtree(work, ignore_errors=True)  # the second user's directory under /tmp


@pytest.mark.parametrize(
    ("teams", "message"),
    [
        (
            [{"name": "a", "cohort": "lab", "quota": {"gpus": 2}, "users": ["amy"]},
             {"name": "b", "cohort": "lab", "quota": {"gpus": 2}, "users": ["bob"]}],
            "teams: team a shares cohort lab with another team, but Slurm cannot lend",
        ),
        (
            [{"name": "a", "quota": {"gpus": 2}, "users": ["amy"],
              "within_team": "lower_priority"}],
            "teams: team a has within_team: lower_priority, but Slurm preempts by QoS",
        ),
    ],
)  # fmt: skip
def test_what_slurm_cannot_hold_is_one_line(
    slurm: SlurmCluster, teams: list[dict[str, Any]], message: str
) -> None:
    config = _config(slurm, "refused.yaml", teams=teams)
    env = dict(slurm.env, PODIUM_CONFIG=str(config))
    for args in (["slurm", "teams"], ["queue"], ["teams"]):
        done = subprocess.run([PODIUM, *args], capture_output=True, text=True, env=env)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
