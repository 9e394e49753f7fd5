"""The shared state directory of a real Slurm cluster (1777, as /tmp) with two real
users (issue 60, item 1): a user who makes another user's `user-NAME` before that
user's first job gets nothing of theirs. The victim's job, with a spare node (the
replica keeper's path, on the four-host cluster), refuses to start and says which
path was taken and by whom; nothing is written into the squatted directory and the
squatter's planted script is never run."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml

from podium.backends.slurm.hook import state_dir
from podium.config.cluster import load_config
from tests.integration.slurm_cluster import TERMINAL, SlurmCluster, in_service
from tests.integration.test_permissions import _python, as_login, other_user
from tests.integration.test_slurm_teams import _as_user
from tests.polling import poll
from tests.workers import ensure_user

# One worker runs the "slurm-hosts-1" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-hosts-1")]
__all__ = ["other_user"]  # the fixture, used here by name

SQUATTER = "podium-squat"


@pytest.fixture(scope="module")
def slurm(slurm_hosts: SlurmCluster) -> SlurmCluster:
    return in_service(slurm_hosts)


@pytest.fixture(scope="session")
def squatter(other_user: str) -> str:
    """A third user: the one who gets to the state directory first."""
    ensure_user(SQUATTER)
    return SQUATTER


def _shell_as(user: str, command: str) -> None:
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, cwd="/", **as_login(user))  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_users_directory_made_by_another_user_stops_their_job(
    slurm: SlurmCluster, other_user: str, squatter: str
) -> None:
    os.chmod(slurm.directory, 0o755)  # the users read the config and Slurm's
    state = state_dir(load_config(slurm.config))
    state.chmod(0o1777)
    squat = state / f"user-{other_user}"
    shutil.rmtree(squat, ignore_errors=True)  # the victim's first job is still to come
    plant = "#!/bin/bash\nid\n"
    _shell_as(squatter, f"mkdir -m 0777 {squat} && mkdir -m 0777 {squat}/slurm-jobs "
              f"{squat}/checkpoints && printf %s {plant!r} > {squat}/planted")  # fmt: skip
    data = yaml.safe_load(slurm.config.read_text())
    data["slurm"]["python"] = _python[0]  # an interpreter the victim may run
    config = slurm.directory / "etc" / "victim.yaml"
    config.write_text(yaml.safe_dump(data))
    config.chmod(0o644)
    work = Path(tempfile.mkdtemp(prefix="podium-victim-"))
    os.chown(work, *(as_login(other_user)[k] for k in ("user", "group")))
    job_id = 0
    try:
        done = _as_user(
            slurm, other_user, config, work, "submit", "--parsable", "-N", "2",
            "--ntasks-per-node=1", "--spares=1", "-o", f"{work}/%j.out",
            "--wrap", 'echo secret > "$PODIUM_CHECKPOINT_DIR/ckpt"; exit 0',
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        job_id = int(done.stdout)
        job = poll(lambda: slurm.json("show", str(job_id)), lambda j: j["state"] in TERMINAL,
                   f"job {job_id} to end", 90)  # fmt: skip
        out = (work / f"{job_id}.out").read_text()
        assert job["state"] == "FAILED", out
        line = next(x for x in out.splitlines() if x.startswith("podium: not started:"))
        assert f"{squat} is uid {pwd.getpwnam(squatter).pw_uid} ({squatter})'s" in line, out
        assert "an administrator removes it" in line
        made = sorted(str(p.relative_to(squat)) for p in squat.rglob("*"))
        assert made == ["checkpoints", "planted", "slurm-jobs"], made  # nothing of the victim's
    finally:
        if job_id:
            slurm.podium("cancel", str(job_id), check=False)
        shutil.rmtree(squat, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
