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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.slurm_cluster import SlurmCluster, in_service, start_cluster
from tests.integration.training_checks import check_elastic_training
from tests.polling import poll

# One worker runs the "slurm-clusters" modules one after another (tests/conftest.py)
pytestmark = [pytest.mark.integration, pytest.mark.slurm, pytest.mark.xdist_group("slurm-clusters")]
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
    """The job's record once `test` holds for it; else fail with what the keeper said
    (its output's tail) and what Slurm had pending, as the keeper read it."""
    try:
        return poll(
            lambda: slurm.json("show", str(job)), test, f"job {job} never got there", timeout
        )
    except AssertionError as failed:
        shown = slurm.json("show", str(job))
        out = Path(shown["stdout"]) if shown.get("stdout") else None
        tail = out.read_text()[-3000:] if out is not None and out.exists() else "(no output)"
        pending = subprocess.run(
            ["squeue", "-h", "-t", "PD", "-S", "-p", "-o", "%i|%q|%D|%r|%k"],
            env=slurm.env, capture_output=True, text=True,
        ).stdout  # fmt: skip
        idle = subprocess.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], env=slurm.env,
                              capture_output=True, text=True).stdout  # fmt: skip
        raise AssertionError(
            f"{failed}\npending (id|qos|nodes|reason|comment):\n{pending}idle nodes: "
            f"{idle.split()}\nthe job's output:\n{tail}"
        ) from None


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


STEPS = 200
COMMON = (f"--model gpt --steps {STEPS} --checkpoint-every 20 --step-time 0.05 "
          "--global-batch 32 --epoch-samples 1024")  # fmt: skip


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same training at one fixed size: its progress file."""
    where = tmp_path_factory.mktemp("reference")
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "train.py"), *COMMON.split(),
         "--progress", str(where / "ref.jsonl")],
        env=dict(os.environ, PODIUM_CHECKPOINT_DIR=str(where / "ckpt"), RANK="0", WORLD_SIZE="1"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return where / "ref.jsonl"


def _train(slurm: SlurmCluster, work: Path, *options: str) -> int:
    """examples/train.py as a low-QoS `--elastic=1:4` job, its files in `work`."""
    return _submit(
        slurm, "--qos=low", "--elastic=1:4", "--gpus-per-task=1", "--resize-grace=60",
        f"--checkpoint-dir={work / 'ckpt'}", "-o", str(work / "train-%j.out"), *options,
        "--wrap", f"exec {sys.executable} {EXAMPLES / 'train.py'} {COMMON} "
        f"--progress {work / 'p.jsonl'} --sample-log {work / 'samples.jsonl'}", cwd=work,
    )  # fmt: skip


def test_train_py_goes_on_across_2_1_and_4_hosts(
    slurm: SlurmCluster, tmp_path: Path, reference: Path
) -> None:
    blocker = _submit(slurm, "--qos=normal", "-N2", "--exclusive", "-o", "/dev/null",
                      "--wrap", "sleep 300")  # fmt: skip
    mine = [blocker]
    try:
        _go_on_across_2_1_and_4(slurm, tmp_path, reference, mine)
    finally:  # else a failure here would leave the shared cluster's nodes taken
        slurm.podium("cancel", *map(str, mine), check=False)


def _go_on_across_2_1_and_4(
    slurm: SlurmCluster, tmp_path: Path, reference: Path, mine: list[int]
) -> None:
    """The test's body; `mine` starts with the blocker and gets each job submitted."""
    blocker = mine[0]
    slurm.wait_job(blocker, {"RUNNING"})
    progress = tmp_path / "p.jsonl"
    job = _train(slurm, tmp_path)
    mine.append(job)
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
    mine.append(urgent)
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
    sizes = [(r["from"], r["to"]) for r in shown["resize_log"]]
    # then it grows to 4 as hosts come free: at once, or a step at a time when the two
    # cancelled jobs' hosts came back apart (seen under load: 1 -> 3 -> 4)
    assert sizes[0] == (2, 1) and sizes[-1][1] == 4, sizes
    assert all(b > a for a, b in sizes[1:]), sizes
    assert all(sizes[i + 1][0] == sizes[i][1] for i in range(len(sizes) - 1)), sizes
    assert shrink["done"] - shrink["time"] < 60  # within --resize-grace
    worlds = check_elastic_training(
        progress, tmp_path / "samples.jsonl", reference, STEPS, batch=32, epoch_steps=32
    )
    assert worlds == [2, 1, 4], worlds
    poll(
        lambda: subprocess.run(["squeue", "-h", "-t", "PD,R", "-o", "%k"], env=slurm.env,
                               capture_output=True, text=True, check=True).stdout,
        lambda out: f"podium-elastic-member:{job}" not in out,
        "its members cancelled with it", 30,
    )  # fmt: skip


def test_a_slow_host_is_named_confirmed_drained_and_left(
    slurm: SlurmCluster, tmp_path: Path, reference: Path
) -> None:
    """A 4-host job's third host gets a 100 Mbit/s link mid-run (a tbf on both ends of
    its veth): the ranks' link checks name it within LOOKS checks, the yardstick beside
    a good host confirms it, it is drained with both figures, and the job goes on at 3
    hosts to the end with the loss of a fixed-size run."""
    progress = tmp_path / "p.jsonl"
    job = _train(slurm, tmp_path)
    four = _until(slurm, job, lambda j: j.get("replicas") == 4 and j.get("rank_nodes"))
    victim = four["rank_nodes"][2]
    poll(lambda: _events(progress),
         lambda p: max((e["step"] for e in p if e["event"] == "step"), default=0) >= 25,
         "25 steps at 4 hosts", 120)  # fmt: skip
    slowed_at = time.time()
    slurm.node_sh(victim, "slow", "100mbit")
    try:
        three = _until(slurm, job, lambda j: j.get("replicas") == 3 and victim not in j["nodes"],
                       timeout=120)  # fmt: skip
        leave = three["resize_log"][-1]
        assert leave["cause"].startswith(f"leave {victim}: slow links"), leave
        assert leave["drained"] == victim
        assert leave["yardstick"]["suspect"] < 0.7 * leave["yardstick"]["good"], leave
        steps = [e for e in _events(progress) if e["event"] == "step"]
        before = max(e["step"] for e in steps if e["t"] <= slowed_at)
        named = max(e["step"] for e in steps if e["t"] <= leave["time"])
        assert named - before <= 40, (before, named)  # 3 checks, 10 steps apart, and one begun
        node = slurm.node(victim)
        assert node["state"].startswith("drain") and "busbw" in node["reason"], node
        assert "beside" in node["reason"] and f"job {job}" in node["reason"]
        final = slurm.wait_job(job, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=300)
        assert final["state"] == "COMPLETED", (tmp_path / f"train-{job}.out").read_text()[-3000:]
        worlds = check_elastic_training(
            progress, tmp_path / "samples.jsonl", reference, STEPS, batch=32, epoch_steps=32
        )
        assert worlds == [4, 3], worlds
    finally:
        slurm.node_sh(victim, "fast")
        slurm.podium("resume", victim, check=False)


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
