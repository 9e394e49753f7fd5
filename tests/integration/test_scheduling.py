"""The daemon's scheduling policy: backfill, preemption with resume, limits, views."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.polling import wait_until

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

POLICY = """\
qos:
  - {name: high, priority: 1000, preempt: [low]}
  - {name: normal, priority: 100, max_gpus_per_user: 3, max_submit_jobs_per_user: 20}
  - {name: low, priority: 10, preempt_mode: requeue}
accounts:
  - {name: physics, shares: 3}
  - {name: biology, shares: 1, max_gpus: 1}
"""


@pytest.fixture
def policy_cluster() -> Iterator[Cluster]:
    c = make_cluster(kill_wait=8.0, extra=POLICY)
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


def test_backfill_never_delays_the_reserved_job(policy_cluster: Cluster) -> None:
    c = policy_cluster
    running = c.submit("--gpus=3", "--time=0:30", "--qos=high", "--wrap", "sleep 30")
    c.wait(running, {"RUNNING"})
    big = c.submit("--gpus=4", "--time=1:00", "--qos=high", "--wrap", "true")
    short = c.submit("--gpus=1", "--time=0:10", "--wrap", "sleep 1")  # ends before the reservation
    long = c.submit("--gpus=1", "--time=10:00", "--wrap", "sleep 1")  # would delay it
    assert c.wait(short, {"RUNNING", "COMPLETED"})["state"] in ("RUNNING", "COMPLETED")
    c.wait_reason(big, "Resources")
    assert c.wait_reason(long, "Priority")["state"] == "PENDING"
    prios = json.loads(c.cli("priority", "--json", check=True).stdout)
    by_id = {p["job_id"]: p for p in prios}
    assert by_id[big]["priority"] > by_id[long]["priority"]
    assert {"age", "fairshare", "qos_factor", "jobsize", "partition_factor", "nice"} <= set(
        by_id[big]
    )
    assert "PRIORITY" in c.cli("priority", check=True).stdout
    c.cli("cancel", str(running), str(big), str(long), check=True)


def test_limits_hold_jobs_with_the_limit_named(policy_cluster: Cluster) -> None:
    c = policy_cluster
    first = c.submit("--gpus=2", "--wrap", "sleep 20")
    c.wait(first, {"RUNNING"})
    second = c.submit("--gpus=2", "--wrap", "true")
    c.wait_reason(second, "QOSMaxGRESPerUser")
    bio = c.submit("--account=biology", "--gpus=2", "--qos=low", "--wrap", "true")
    c.wait_reason(bio, "AssocGrpGRES")
    c.cli("cancel", str(first), str(second), str(bio), check=True)
    many = c.cli("submit", "--array=0-30", "--hold", "--wrap", "true")
    assert many.returncode == 2 and "QOSMaxSubmitJobPerUserLimit" in many.stderr


def test_share_reports_decayed_usage(policy_cluster: Cluster) -> None:
    c = policy_cluster
    job_id = c.submit("--account=physics", "--gpus=2", "--wrap", "sleep 1")
    c.wait(job_id)
    rows = json.loads(c.cli("share", "--json", check=True).stdout)
    physics = next(r for r in rows if r["account"] == "physics" and r["user"] is None)
    assert physics["raw_shares"] == 3 and physics["norm_shares"] == pytest.approx(0.75)
    assert physics["raw_usage"] == pytest.approx(2.0, rel=0.5)  # ~2 GPU x 1 s
    assert physics["fairshare"] < 1.0
    assert "FAIRSHARE" in c.cli("share", check=True).stdout


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch not installed")
def test_preempted_job_is_requeued_and_resumes_from_its_checkpoint(policy_cluster: Cluster) -> None:
    c = policy_cluster
    env_script = c.script(
        "#SBATCH --qos=low --gpus=4 -o low-%j-%a.out --open-mode=append -J trainer\n"
        f"exec python3 {EXAMPLES / 'train.py'} --model resnet --steps 160 --checkpoint-every 10 "
        "--step-time 0.02\n",
        "low.sh",
    )
    low = c.submit(str(env_script))
    out = c.work / f"low-{low}-4294967294.out"
    wait_until(lambda: out.exists() and re.search(r"step [1-9]\d+/160", out.read_text()),
               f"step 10 or later in {out}", 120)  # fmt: skip
    urgent = c.submit("--qos=high", "--gpus=2", "--wrap", "sleep 1")
    job = c.wait(low, {"PENDING"}, timeout=60)
    assert job["restart_count"] == 1
    events = [e["kind"] for e in c.job(low)["events"]]
    assert "requeue" in events
    assert c.wait(urgent, timeout=60)["state"] == "COMPLETED"
    final = c.wait(low, timeout=300)
    assert final["state"] == "COMPLETED" and final["restart_count"] == 1
    text = out.read_text()
    saved = re.search(r"SIGTERM: checkpoint saved at step (\d+)", text)
    resumed = re.search(r"resumed from checkpoint at step (\d+)", text)
    assert saved and resumed, text
    assert int(resumed.group(1)) == int(saved.group(1)) > 0
    assert "restart=1" in text and "done: 160 steps" in text


def test_preempt_mode_cancel_ends_the_victim() -> None:
    c = make_cluster(
        kill_wait=1.0,
        extra="qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
        "  - {name: normal, priority: 100}\n  - {name: low, priority: 10, preempt_mode: cancel}\n",
    )
    c.start()
    try:
        victim = c.submit("--qos=low", "--gpus=4", "--wrap", "sleep 60")
        c.wait(victim, {"RUNNING"})
        urgent = c.submit("--qos=high", "--gpus=1", "--wrap", "true")
        job = c.wait(victim, timeout=30)
        assert job["state"] == "PREEMPTED" and job["restart_count"] == 0
        assert job["signal"] == 15, job  # SIGTERM, the default preemption signal
        assert c.wait(urgent, timeout=30)["state"] == "COMPLETED"
    finally:
        teardown_cluster(c)


def test_preemption_stops_the_job_that_loses_least_since_its_checkpoint() -> None:
    """Two low-QoS jobs of 2 GPUs: `steady` has run longer but writes a checkpoint
    every 0.3 s; `fresh` started a second later and never checkpoints. Stopping fresh
    loses ~5 s x 2 GPUs, stopping steady under a second's: the daemon samples the
    checkpoint directories and preempts steady (by runtime alone it would be fresh)."""
    c = make_cluster(
        kill_wait=1.0,
        extra="qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
        "  - {name: normal, priority: 100}\n  - {name: low, priority: 10, preempt_mode: cancel}\n"
        "health: {interval_s: 0.5}\n",
    )
    c.start()
    try:
        steady = c.submit(
            "--qos=low", "--gpus=2", "-J", "steady", "--wrap",
            'while :; do date > "$PODIUM_CHECKPOINT_DIR/ckpt.tmp" && '
            'mv "$PODIUM_CHECKPOINT_DIR/ckpt.tmp" "$PODIUM_CHECKPOINT_DIR/ckpt"; sleep 0.3; done',
        )  # fmt: skip
        c.wait(steady, {"RUNNING"})
        wait_until(lambda: c.checkpoints(steady), "the daemon to sample steady's checkpoint")
        fresh = c.submit("--qos=low", "--gpus=2", "-J", "fresh", "--wrap", "sleep 120")
        c.wait(fresh, {"RUNNING"})
        fresh_ran = time.time()
        # fresh loses 2 s or more, steady what it did since a checkpoint sampled just now
        wait_until(
            lambda: any(t > fresh_ran + 2 for t in c.checkpoints(steady)),
            "a checkpoint of steady sampled 2 s after fresh started",
        )
        urgent = c.submit("--qos=high", "--gpus=2", "--wrap", "true")
        assert c.wait(steady, timeout=30)["state"] == "PREEMPTED"
        assert c.wait(urgent, timeout=30)["state"] == "COMPLETED"
        assert c.job(fresh)["state"] == "RUNNING"
        c.cli("cancel", str(fresh), check=True)
    finally:
        teardown_cluster(c)


def test_a_job_that_reports_its_checkpoints_is_the_cheapest_victim() -> None:
    """As above, with `podium checkpoint --step N` instead of files: `steady` says it
    checkpointed every 0.5 s; `fresh`, a second younger, says nothing. A high-QoS
    job preempts steady; its events list the steps it reported."""
    c = make_cluster(
        kill_wait=1.0,
        extra="qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
        "  - {name: normal, priority: 100}\n  - {name: low, priority: 10, preempt_mode: cancel}\n",
    )
    c.start()
    try:
        steady = c.submit(
            "--qos=low", "--gpus=2", "-J", "steady", "--wrap",
            "i=0; while :; do i=$((i+1)); podium checkpoint --step $i >/dev/null; sleep 0.5; done",
        )  # fmt: skip
        c.wait(steady, {"RUNNING"})
        wait_until(lambda: c.checkpoints(steady), "steady's first checkpoint report")
        fresh = c.submit("--qos=low", "--gpus=2", "-J", "fresh", "--wrap", "sleep 120")
        c.wait(fresh, {"RUNNING"})
        fresh_ran = time.time()
        wait_until(
            lambda: len(t := c.checkpoints(steady)) >= 6 and t[-1] > fresh_ran + 2,
            "six reports from steady, one 2 s after fresh started",
        )
        urgent = c.submit("--qos=high", "--gpus=2", "--wrap", "true")
        ended = c.wait(steady, timeout=30)
        assert ended["state"] == "PREEMPTED"
        shown = c.job(steady)
        assert 0 <= shown["lost_gpu_seconds"]["preemption"] < 4, shown["lost_gpu_seconds"]
        steps = [e["detail"] for e in shown["events"] if e["kind"] == "checkpoint"]
        assert len(steps) >= 5 and steps[:2] == ["step 1", "step 2"], steps
        assert c.wait(urgent, timeout=30)["state"] == "COMPLETED"
        assert c.job(fresh)["state"] == "RUNNING"
        outside = c.cli("checkpoint", "--step", "3")
        assert outside.returncode != 0 and "inside a job" in outside.stderr
        over = c.cli("checkpoint", "--step", "3", "--job", str(steady))
        assert over.returncode != 0 and "only a running job" in over.stderr
        assert len(over.stderr.strip().splitlines()) == 1
        c.cli("cancel", str(fresh), check=True)
    finally:
        teardown_cluster(c)


def test_a_victim_that_saves_in_its_grace_and_says_so_is_requeued_at_once() -> None:
    """kill_wait_s is 30 s, but the victim saves on SIGTERM, says `podium checkpoint`
    and would linger: it is stopped and requeued at once, losing next to nothing."""
    c = make_cluster(
        kill_wait=30.0,
        extra="qos:\n  - {name: high, priority: 1000, preempt: [low]}\n"
        "  - {name: normal, priority: 100}\n  - {name: low, priority: 10}\n",
    )
    c.start()
    try:
        victim = c.submit(
            "--qos=low", "--gpus=4", "--wrap",
            "trap 'podium checkpoint --step 42 >/dev/null; sleep 100' TERM; "
            "echo trapped; while :; do sleep 0.2; done",
        )  # fmt: skip
        c.wait(victim, {"RUNNING"})
        wait_until(lambda: "trapped" in _stdout(c, victim), "the victim to set its trap")
        asked = time.monotonic()
        urgent = c.submit("--qos=high", "--gpus=2", "--wrap", "sleep 30")
        c.wait(urgent, {"RUNNING"}, timeout=20)
        assert time.monotonic() - asked < 15  # not the 30 s grace
        shown = c.job(victim)
        assert shown["state"] == "PENDING" and shown["restart_count"] == 1
        assert shown["lost_gpu_seconds"]["preemption"] == 0, shown["lost_gpu_seconds"]
        assert "step 42" in [e["detail"] for e in shown["events"] if e["kind"] == "checkpoint"]
        c.cli("cancel", str(victim), str(urgent), check=True)
    finally:
        teardown_cluster(c)


def _stdout(c: Cluster, job_id: int) -> str:
    path = c.job(job_id)["stdout"]
    try:
        return Path(path).read_text() if path else ""
    except FileNotFoundError:
        return ""
