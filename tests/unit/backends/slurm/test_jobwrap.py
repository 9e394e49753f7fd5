"""The job wrapper and the keepers in a shared state directory another user got to
first (issue 60, item 1): the job refuses to start, in one line that names the path,
and nothing of it is made or written there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
SQUATTER = 65534  # nobody


def _run(module: str, state: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=state,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PODIUM_STATE_DIR": str(state),
             "SLURM_JOB_USER": "bob", "SLURM_JOB_ID": "77", **env},
    )  # fmt: skip


@pytest.fixture
def state(tmp_path: Path) -> Path:
    base = tmp_path / "state"
    base.mkdir()
    base.chmod(0o1777)
    return base


def test_a_first_job_makes_its_users_directories_private(state: Path) -> None:
    checkpoint = state / "user-bob" / "checkpoints" / "77"
    done = _run("podium.backends.slurm.jobwrap", state, "start",
                PODIUM_CHECKPOINT_DIR=str(checkpoint))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert checkpoint.is_dir() and (state / "user-bob" / "slurm-jobs" / "77.json").is_file()
    assert oct(os.stat(state / "user-bob").st_mode & 0o777) == "0o700"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory another user's")
@pytest.mark.parametrize(
    "module", ["podium.backends.slurm.jobwrap", "podium.backends.slurm.replica_keeper"]
)
def test_a_squatted_user_directory_stops_the_job_before_anything_is_kept(
    state: Path, module: str
) -> None:
    squat = state / "user-bob"
    squat.mkdir(mode=0o777)
    squat.chmod(0o777)
    (squat / "slurm-jobs" / "77.0").mkdir(parents=True)
    (squat / "slurm-jobs" / "77.0" / "script").write_text("#!/bin/sh\nid\n")
    for path in (squat, squat / "slurm-jobs", squat / "slurm-jobs" / "77.0"):
        os.chown(path, SQUATTER, SQUATTER)
    args = ["start"] if module.endswith("jobwrap") else []
    done = _run(module, state, *args, SLURM_JOB_NODELIST="n[1-3]", PODIUM_SPARE_NODES="1",
                PODIUM_CHECKPOINT_DIR=str(squat / "checkpoints" / "77"))  # fmt: skip
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"podium: not started: {squat} is uid {SQUATTER}")
    assert "an administrator removes it" in lines[0]
    assert sorted(p.name for p in squat.rglob("*")) == ["77.0", "script", "slurm-jobs"]
    assert (squat / "slurm-jobs" / "77.0" / "script").read_text() == "#!/bin/sh\nid\n"
