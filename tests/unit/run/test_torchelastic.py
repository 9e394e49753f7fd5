"""Which jobs are TorchElastic ones, and which Python hosts their rendezvous store; a
torchft job's lighthouse and environment."""

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
from podium.run.torchft import LIGHTHOUSE, lighthouse_argv, lighthouse_binary, torchft_environment


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


def test_the_lighthouse_is_torchfts_own_on_the_jobs_path(tmp_path: Path) -> None:
    """torchft_lighthouse is looked for on the job's PATH, as a regular file the user
    may run: a FIFO or a file without the execute bit is passed over."""
    fifo_dir, plain_dir, good_dir = (tmp_path / n for n in ("fifo", "plain", "good"))
    for d in (fifo_dir, plain_dir, good_dir):
        d.mkdir()
    os.mkfifo(fifo_dir / LIGHTHOUSE)
    (plain_dir / LIGHTHOUSE).write_text("#!/bin/sh\n")
    (good_dir / LIGHTHOUSE).write_text("#!/bin/sh\n")
    (good_dir / LIGHTHOUSE).chmod(0o755)
    assert lighthouse_binary(f"{fifo_dir}:{plain_dir}:{good_dir}") == str(good_dir / LIGHTHOUSE)
    assert lighthouse_binary(f"{fifo_dir}:{plain_dir}") is None
    argv = lighthouse_argv("/x/torchft_lighthouse", 4321)
    assert argv[argv.index("--bind") + 1] == "127.0.0.1:4321"  # loopback only
    assert argv[argv.index("--min_replicas") + 1] == "1"  # the survivors step on alone


def test_each_replica_group_is_told_its_id_and_the_lighthouse() -> None:
    env = {"PATH": "/usr/bin"}
    torchft_environment(env, 1, 3, "http://127.0.0.1:4321")
    assert (env["REPLICA_GROUP_ID"], env["NUM_REPLICA_GROUPS"]) == ("1", "3")
    assert env["TORCHFT_LIGHTHOUSE"] == "http://127.0.0.1:4321"
    own = {"TORCHFT_LIGHTHOUSE": "http://head:29510"}  # the job's own lighthouse wins
    torchft_environment(own, 0, 2, "http://127.0.0.1:4321")
    assert own["TORCHFT_LIGHTHOUSE"] == "http://head:29510"
    none: dict[str, str] = {}
    torchft_environment(none, 0, 2, "")  # no lighthouse runs: none is named
    assert "TORCHFT_LIGHTHOUSE" not in none
