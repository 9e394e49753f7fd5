"""The replica keeper's pure parts: steps read from squeue, the job's directory, the
rendezvous port of each generation, and what the hook reads from a batch script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from podium.backends.slurm.hook import exported, write_as_owner
from podium.backends.slurm.replica_keeper import Keeper, job_dir, numbered_steps


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
    with pytest.raises(OSError):
        write_as_owner(tmp_path, parts, "fault-n3.json", uid, {})
    assert not list(elsewhere.iterdir())
