"""The replica keeper's pure parts: steps read from squeue, the job's directory, the
rendezvous port of each generation, and what the hook reads from a batch script."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from podium.backends.slurm.hook import exported, write_as_owner
from podium.backends.slurm.keeper_parts import job_dir, numbered_steps
from podium.backends.slurm.replica_keeper import Keeper


def test_only_numbered_steps_are_the_keepers() -> None:
    text = "7.batch|n1\n7.extern|n1,n2\n7.0|n1\n7.1|n2\n7.12|n3\n"
    assert numbered_steps(text) == [("0", "n1"), ("1", "n2"), ("12", "n3")]
    assert numbered_steps("") == []


def test_each_run_has_its_own_directory_in_its_users() -> None:
    env = {"PODIUM_STATE_DIR": "/shared/podium", "SLURM_JOB_USER": "alice",
           "SLURM_JOB_ID": "42", "SLURM_RESTART_COUNT": "2"}  # fmt: skip
    assert job_dir(env) == Path("/shared/podium/user-alice/slurm-jobs/42.2")


def test_each_generation_meets_on_a_port_of_its_own(tmp_path: Path) -> None:
    keeper = Keeper(job_id="9", job_dir=tmp_path / "run", script=tmp_path / "s", args=[],
                    replica_nodes=["a", "b"], spare_nodes=["c"], base_port=20063)  # fmt: skip
    (tmp_path / "run").mkdir()  # make_job_dir's, checked
    keeper.prepare()
    ports = [keeper.port(), keeper.port(ahead=1), keeper.port(ahead=2)]
    assert ports[0] == 20063 and len(set(ports)) == 3
    assert all(20000 <= p < 40000 for p in ports)
    assert (tmp_path / "run" / "replace").read_text() == ""  # the notice, empty
    assert (tmp_path / "run" / "ranks").is_dir()


def test_the_hook_reads_numbers_the_script_exports() -> None:
    script = "#!/bin/bash\nexport PODIUM_AUTO_RESUME=3\nexport PODIUM_SPARE_NODES=1\n"
    assert exported(script, "PODIUM_SPARE_NODES") == 1
    assert exported(script, "PODIUM_AUTO_RESUME") == 3
    assert exported("export PODIUM_SPARE_NODES=x\n", "PODIUM_SPARE_NODES") == 0


def test_without_spare_nodes_the_keeper_refuses_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "podium.backends.slurm.replica_keeper"],
        capture_output=True, text=True,
        env={"SLURM_JOB_NODELIST": "n[1-2]", "PODIUM_SPARE_NODES": "0", "PATH": "/usr/bin"},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "podium: the replica keeper needs spare nodes beside the replicas' (0 spare of 2 nodes)"
    ]


def test_the_hook_writes_into_a_jobs_directory_only_through_its_users_own(
    tmp_path: Path,
) -> None:
    """The hook runs as root and the job's directory is its user's: no link is
    followed, and a part owned by anyone else stops the write."""
    uid = os.getuid()
    run = tmp_path / "user-alice" / "slurm-jobs" / "7.0"
    run.mkdir(parents=True)
    parts = ("user-alice", "slurm-jobs", "7.0")
    write_as_owner(tmp_path, parts, "fault-n1.json", uid, {"reason": "Xid 79"})
    assert json.loads((run / "fault-n1.json").read_text()) == {"reason": "Xid 79"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "user-bob").mkdir()
    (tmp_path / "user-bob" / "slurm-jobs").symlink_to(elsewhere)
    with pytest.raises(OSError):
        write_as_owner(tmp_path, ("user-bob", "slurm-jobs"), "fault-n1.json", uid, {})
    assert not list(elsewhere.iterdir())
    with pytest.raises(PermissionError):
        write_as_owner(tmp_path, parts, "fault-n2.json", uid + 1, {})
    (run / "fault-n3.json").symlink_to(elsewhere / "x")
    write_as_owner(tmp_path, parts, "fault-n3.json", uid, {})  # the link replaced
    assert not list(elsewhere.iterdir())
    assert not (run / "fault-n3.json").is_symlink()


def _job_dir_of(tmp_path: Path, uid: int) -> tuple[Path, tuple[str, ...]]:
    """The job's directory, its user's (`uid`: chowned when the test runs as root)."""
    run = tmp_path / "user-bob" / "slurm-jobs" / "7.0"
    run.mkdir(parents=True)
    if uid != os.getuid():
        for path in (run, run.parent, run.parent.parent):
            os.chown(path, uid, uid)
    return run, ("user-bob", "slurm-jobs", "7.0")


def _timed_write(tmp_path: Path, parts: tuple[str, ...], uid: int) -> float:
    started = time.monotonic()
    write_as_owner(tmp_path, parts, "fault-n1.json", uid, {"reason": "Xid 79"})
    return time.monotonic() - started


@pytest.mark.parametrize("trick", ["fifo", "hard link", "link", "directory"])
def test_nothing_the_user_leaves_at_the_faults_name_blocks_or_redirects_the_hook(
    tmp_path: Path, trick: str
) -> None:
    """Issue 60, item 2: the root hook's fault file, with the job's user's trick in
    place. It finishes at once and touches no other file: the FIFO, the hard link
    or the link is replaced (a directory there is refused, and left)."""
    uid = 65534 if os.geteuid() == 0 else os.getuid()  # the job's user: not the hook's
    run, parts = _job_dir_of(tmp_path, uid)
    other = tmp_path / "other"
    other.write_text("another user's file")
    other.chmod(0o666)
    target = run / "fault-n1.json"
    if trick == "fifo":
        os.mkfifo(target)
    elif trick == "hard link":
        os.link(other, target)
    elif trick == "link":
        target.symlink_to(other)
    else:
        target.mkdir()
    if trick == "directory":
        with pytest.raises(OSError):
            _timed_write(tmp_path, parts, uid)
        assert target.is_dir()
    else:
        assert _timed_write(tmp_path, parts, uid) < 1
        assert json.loads(target.read_text()) == {"reason": "Xid 79"}
        info = os.lstat(target)
        assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == uid
    assert other.read_text() == "another user's file" and os.stat(other).st_uid == os.getuid()
    assert [p.name for p in run.iterdir()] == ["fault-n1.json"]  # no temporary left


def test_a_name_that_changes_between_check_and_use_changes_nothing(tmp_path: Path) -> None:
    """The user swaps a FIFO, a link and a hard link in and out at the fault's name
    while the hook writes it, 200 times: every write finishes at once, and the other
    file is never touched."""
    uid = os.getuid()
    run, parts = _job_dir_of(tmp_path, uid)
    other = tmp_path / "other"
    other.write_text("kept")
    target = run / "fault-n1.json"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for make in (os.mkfifo, lambda p: os.symlink(other, p), lambda p: os.link(other, p)):
                with contextlib.suppress(OSError):
                    os.unlink(target)
                with contextlib.suppress(OSError):
                    make(target)

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        slowest = max(_timed_write(tmp_path, parts, uid) for _ in range(200))
    finally:
        stop.set()
        swapper.join(5)
    assert slowest < 1
    assert other.read_text() == "kept"


def test_a_torchft_keepers_steps_are_replica_groups_on_their_own_stores(tmp_path: Path) -> None:
    """--torchft on Slurm: each replica node a replica group, its store on its own node;
    the lighthouse the keeper runs named; and the job takes part without a word."""
    keeper = Keeper(job_id="9", job_dir=tmp_path / "run", script=tmp_path / "s", args=[],
                    replica_nodes=["localhost", "b"], spare_nodes=["c"], base_port=20063,
                    stack="torchft", lighthouse_url="http://10.0.0.1:4321")  # fmt: skip
    (tmp_path / "run").mkdir()
    keeper.prepare()
    env = keeper.env(1, "localhost")
    assert (env["REPLICA_GROUP_ID"], env["NUM_REPLICA_GROUPS"]) == ("1", "2")
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "20063")
    assert env["TORCHFT_LIGHTHOUSE"] == "http://10.0.0.1:4321"
    assert keeper.spares is not None and keeper.spares.takes_part()
    assert "REPLICA_GROUP_ID" not in keeper.env(None, "c")  # a standby's, were there one


def test_a_torchelastic_keeper_keeps_one_rendezvous(tmp_path: Path) -> None:
    """A torchrun script with spare nodes: one rendezvous endpoint for the whole job (a
    new node joins it), TorchElastic's settings in every step's environment."""
    keeper = Keeper(job_id="9", job_dir=tmp_path / "run", script=tmp_path / "s", args=[],
                    replica_nodes=["a", "b"], spare_nodes=["c"], base_port=20063,
                    stack="torchelastic")  # fmt: skip
    (tmp_path / "run").mkdir()
    keeper.prepare()
    assert keeper.port() == keeper.port(ahead=1) == 20063
    env = keeper.env(1, "b")
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1" and "PET_RDZV_CONF" in env
    assert keeper.spares is not None and keeper.spares.takes_part()
