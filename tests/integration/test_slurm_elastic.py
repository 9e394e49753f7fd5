"""Elastic training across nodes on a real Slurm (four hosts, accounting with QoS):
`--elastic=1:4` runs one replica per node, each node a Slurm job (the job Podium names
and its members), shown as one job by `podium queue`; it starts at the free size,
shrinks for a QoS that may preempt its own within `--resize-grace`, grows into the
nodes freed after, and examples/train.py goes on across 2, 1 and 4 hosts with the loss
of a fixed-size run and no sample trained twice in an epoch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.slurm_cluster import SlurmCluster, in_service, start_cluster
from tests.integration.training_checks import check_elastic_training
from tests.polling import poll

pytestmark = [pytest.mark.integration, pytest.mark.slurm]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QOS = """
qos:
  - {name: high, priority: 1000, preempt: [low]}
  - {name: normal, priority: 100}
  - {name: low, priority: 10}
elastic: {grow_delay: '0:05'}
"""


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """The four hosts with slurmdbd: Slurm's QoS exist (high, normal, low) and root may
    use them; Podium's config says which may preempt (and so shrink) which."""
    for cluster in start_cluster(port_base=19200, hosts=True, accounting=True):
        for args in (
            ["add", "qos", "low,normal,high"],
            ["modify", "qos", "where", "name=high", "set", "Priority=1000", "Preempt=low"],
            ["modify", "qos", "where", "name=normal", "set", "Priority=100"],
            ["modify", "user", "root", "set", "qos=low,normal,high", "defaultqos=normal"],
        ):
            subprocess.run(["sacctmgr", "-i", *args], env=cluster.env, check=True,
                           capture_output=True)  # fmt: skip
        with cluster.config.open("a") as config:
            config.write(QOS)
        yield in_service(cluster)


def _submit(slurm: SlurmCluster, *args: str, cwd: Path | None = None) -> int:
    out = slurm.podium("submit", "--parsable", *args, cwd=cwd).stdout
    return int(out.strip().split(";")[0])


def _until(slurm: SlurmCluster, job: int, test: Any, timeout: float = 60) -> dict[str, Any]:
    return poll(lambda: slurm.json("show", str(job)), test, f"job {job} never got there", timeout)


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_train_py_goes_on_across_2_1_and_4_hosts(slurm: SlurmCluster, tmp_path: Path) -> None:
    steps, train = 200, EXAMPLES / "train.py"
    common = (f"--model gpt --steps {steps} --checkpoint-every 20 --step-time 0.05 "
              "--global-batch 32 --epoch-samples 1024")  # fmt: skip
    reference = subprocess.run(
        [sys.executable, str(train), *common.split(), "--progress", str(tmp_path / "ref.jsonl")],
        env=dict(os.environ, PODIUM_CHECKPOINT_DIR=str(tmp_path / "ref-ckpt"), RANK="0",
                 WORLD_SIZE="1"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert reference.returncode == 0, reference.stderr[-2000:]
    blocker = _submit(slurm, "--qos=normal", "-N2", "--exclusive", "-o", "/dev/null",
                      "--wrap", "sleep 300")  # fmt: skip
    slurm.wait_job(blocker, {"RUNNING"})
    progress = tmp_path / "p.jsonl"
    job = _submit(
        slurm, "--qos=low", "--elastic=1:4", "--gpus-per-task=1", "--resize-grace=60",
        f"--checkpoint-dir={tmp_path / 'ckpt'}", "-o", str(tmp_path / "train-%j.out"),
        "--wrap", f"exec {sys.executable} {train} {common} --progress {progress} "
        f"--sample-log {tmp_path / 'samples.jsonl'}", cwd=tmp_path,
    )  # fmt: skip
    two = _until(slurm, job, lambda j: j["state"] == "RUNNING" and j.get("replicas") == 2)
    assert len(two["nodes"]) == 2 and not set(two["nodes"]) & set(
        slurm.json("show", str(blocker))["nodes"]
    )
    queue = slurm.json("queue")
    assert [j["job_id"] for j in queue if j["job_id"] not in (blocker,)] == [job]  # one job
    squeue = subprocess.run(["squeue", "-h", "-o", "%i|%k"], env=slurm.env, capture_output=True,
                            text=True, check=True).stdout  # fmt: skip
    assert f"podium-elastic-member:{job}" in squeue  # the admin sees its members
    poll(lambda: _events(progress), lambda p: any(e["event"] == "checkpoint" for e in p),
         "a first checkpoint", 120)  # fmt: skip
    urgent = _submit(slurm, "--qos=high", "-N1", "--exclusive", "-o", "/dev/null",
                     "--wrap", "sleep 300")  # fmt: skip
    one = _until(slurm, job, lambda j: j.get("replicas") == 1, timeout=60)
    shrink = one["resize_log"][0]
    assert shrink["cause"] == f"shrink 2->1 for job {urgent}"
    slurm.wait_job(urgent, {"RUNNING"})
    poll(lambda: _events(progress),
         lambda p: sum(e.get("world") == 1 for e in p if e["event"] == "step") >= 5,
         "five steps at one replica", 120)  # fmt: skip
    slurm.podium("cancel", str(blocker), str(urgent))
    four = _until(slurm, job, lambda j: j.get("replicas") == 4, timeout=90)
    assert len(set(four["nodes"])) == 4 and four["gpus"] == 4
    final = slurm.wait_job(job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=300)
    assert final["state"] == "COMPLETED", (tmp_path / f"train-{job}.out").read_text()[-3000:]
    shown = slurm.json("show", str(job))
    assert [(r["from"], r["to"]) for r in shown["resize_log"]] == [(2, 1), (1, 4)]
    assert shrink["done"] - shrink["time"] < 60  # within --resize-grace
    worlds = check_elastic_training(
        progress, tmp_path / "samples.jsonl", tmp_path / "ref.jsonl", steps, batch=32,
        epoch_steps=32,
    )  # fmt: skip
    assert worlds == [2, 1, 4], worlds
    poll(
        lambda: subprocess.run(["squeue", "-h", "-t", "PD,R", "-o", "%k"], env=slurm.env,
                               capture_output=True, text=True, check=True).stdout,
        lambda out: f"podium-elastic-member:{job}" not in out,
        "its members cancelled with it", 30,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--elastic=1:4", "--spares=1", "--gpus-per-task=1"], "on Slurm give --spares=S without"),
     (["--elastic=1:4", "--switches=1"], "drop --switches"),
     (["--elastic=1:4", "-N", "2"], "drop --nodes")],
)  # fmt: skip
def test_elastic_options_slurm_cannot_hold_are_refused_in_one_line(
    slurm: SlurmCluster, args: list[str], words: str
) -> None:
    done = slurm.podium("submit", *args, "--wrap", "true", check=False)
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
