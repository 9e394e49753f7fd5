"""Which jobs are TorchElastic ones, and which Python hosts their rendezvous store."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from podium.run.containment import carrying
from podium.run.identity import Identity
from podium.run.torchelastic import launches_torchelastic, store_interpreter


@pytest.mark.parametrize(
    "script",
    [
        "#!/bin/bash\ntorchrun --nnodes=2 train.py\n",
        "srun torchrun --nnodes=$SLURM_NNODES train.py",
        "exec python -m torch.distributed.run --nproc-per-node=8 train.py",
        "python3 -m torch.distributed.launch train.py",
        "/opt/venv/bin/torchrun train.py",
        "x=1; torchrun train.py",
    ],
)
def test_scripts_that_start_torchrun_are_torchelastic_jobs(script: str) -> None:
    assert launches_torchelastic(script)


@pytest.mark.parametrize(
    "script",
    [
        "#!/bin/bash\n# torchrun --nnodes=2 train.py (not today)\npython train.py\n",
        "python my_torchrun_wrapper.py",
        "python -m torch.distributed.run_tests",
        "echo torchrun-logs/",
        "",
    ],
)
def test_other_scripts_are_not(script: str) -> None:
    assert not launches_torchelastic(script)


def test_the_store_runs_under_torchruns_own_python(tmp_path: Path) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "torchrun").write_text(f"#!{sys.executable}\nimport torch\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "python3").write_text("#!/bin/sh\n")
    (other / "python3").chmod(0o755)
    assert store_interpreter(f"{other}:{bin_dir}") == sys.executable  # torchrun first
    assert store_interpreter(str(other)) == str(other / "python3")  # else python3
    assert store_interpreter(str(tmp_path / "none")) is None


def test_carrying_finds_processes_by_what_they_were_started_with() -> None:
    env = dict(os.environ, PODIUM_TASK_INSTANCE="7")
    marked = subprocess.Popen(["sleep", "30"], env=env)
    unmarked = subprocess.Popen(["sleep", "30"], env=dict(env, PODIUM_TASK_INSTANCE="71"))
    try:
        pids = {marked.pid, unmarked.pid, 2**22 + 7}  # the last: no such process
        assert carrying(pids, "PODIUM_TASK_INSTANCE", "7") == {marked.pid}
    finally:
        for p in (marked, unmarked):
            p.kill()
            p.wait()


def test_a_torchrun_that_is_a_fifo_is_passed_over_not_waited_on(tmp_path: Path) -> None:
    """The PATH is the user's: a FIFO named torchrun would block an open for ever."""
    trap = tmp_path / "trap"
    trap.mkdir()
    os.mkfifo(trap / "torchrun")
    real = tmp_path / "bin"
    real.mkdir()
    (real / "torchrun").write_text(f"#!{sys.executable}\n")
    assert store_interpreter(f"{trap}:{real}") == sys.executable


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to look as another user")
def test_an_interpreter_the_user_may_not_run_is_passed_over() -> None:
    """Looked at as the job's user: root (the real user) may run a 0700 file, they not."""
    try:
        user = pwd.getpwnam("podium-test")
    except KeyError:
        pytest.skip("no podium-test user")
    where = Path(tempfile.mkdtemp(prefix="podium-te-"))
    try:
        where.chmod(0o755)
        python = where / "python"
        shutil.copy(sys.executable, python)
        python.chmod(0o700)  # root's alone
        (where / "torchrun").write_text(f"#!{python}\n")
        (where / "torchrun").chmod(0o755)
        assert store_interpreter(str(where)) == str(python)  # as root
        with Identity(user.pw_uid, user.pw_gid, (user.pw_gid,), 0o022).entered():
            assert store_interpreter(str(where)) is None
    finally:
        shutil.rmtree(where)
