"""Elastic jobs on the real daemon: real rank processes started at the size that fits,
shrunk for a higher-QoS job instead of preempted, grown back when GPUs free up, told
of each resize by signal and notice, and stopped at the deadline when they ignore it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster

QOS = (
    "qos:\n  - {name: high, priority: 1000}\n  - {name: normal, priority: 100}\n"
    "  - {name: low, priority: 10}\n"
    "elastic: {min_stable: '5:00', grow_delay: '0:02'}\n"
)

# One replica: logs its size, saves and exits on the resize signal (unless IGNORE).
RANK = r"""import json, os, signal, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
log = os.path.join(os.environ["PODIUM_SUBMIT_DIR"], "ranks.log")
def say(what):
    with open(log, "a") as fh:
        fh.write(json.dumps({"rank": rank, "world": world, "what": what,
            "replicas": os.environ["PODIUM_REPLICAS"],
            "resizes": os.environ["PODIUM_RESIZE_COUNT"],
            "local_rank": os.environ["LOCAL_RANK"], "master": os.environ["MASTER_PORT"],
            "notice": open(os.environ["PODIUM_RESIZE_FILE"]).read().strip()}) + "\n")
def saved(sig, frame):
    say("saved")
    sys.exit(0)
if os.environ.get("IGNORE"):
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
else:
    signal.signal(signal.SIGUSR1, saved)
say("start")
while True:
    time.sleep(0.1)
"""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = make_cluster(gpus=4, cpus=8, kill_wait=1.0, extra=QOS)
    c.start()
    yield c
    teardown_cluster(c)


def _lines(c: Cluster) -> list[dict[str, Any]]:
    path = c.work / "ranks.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _until(c: Cluster, job: int, test: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        shown = json.loads(c.cli("show", str(job), "--json", check=True).stdout)
        if test(shown):
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} never got there: {shown}")
        time.sleep(0.2)


def _submit_elastic(c: Cluster, *more: str) -> int:
    (c.work / "rank.py").write_text(RANK)
    return c.submit("--qos=low", "--elastic=1:4", "--gpus-per-task=1", "--resize-grace=10",
                    *more, "--wrap", "exec python3 rank.py", cwd=c.work)  # fmt: skip


def test_an_elastic_job_shrinks_for_a_higher_qos_and_grows_back(cluster: Cluster) -> None:
    c = cluster
    blocker = c.submit("--qos=normal", "--gpus=2", "--wrap", "sleep 300")
    c.wait(blocker, {"RUNNING"})
    job = _submit_elastic(c)
    two = _until(c, job, lambda j: j["state"] == "RUNNING" and j["replicas"] == 2)
    assert (two["replicas_min"], two["replicas_max"], two["gpus"]) == (1, 4, 2)
    deadline = time.monotonic() + 10
    while len([x for x in _lines(c) if x["what"] == "start"]) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    urgent = c.submit("--qos=high", "--gpus=1", "--wrap", "sleep 300")
    c.wait(urgent, {"RUNNING"}, timeout=30)
    one = _until(c, job, lambda j: j["state"] == "RUNNING" and j["replicas"] == 1)
    assert one["resizes"] == 1 and one["restart_count"] == 0
    assert one["resize_log"][0]["cause"] == f"shrink 2->1 for job {urgent}"
    for other in (blocker, urgent):
        c.cli("cancel", str(other), check=True)
    four = _until(c, job, lambda j: j["state"] == "RUNNING" and j["replicas"] == 4)
    assert four["resizes"] == 2 and four["resize_log"][1]["cause"] == "grow 1->4 into free GPUs"
    assert [e["kind"] for e in four["events"]].count("resize") == 2
    deadline = time.monotonic() + 10
    while len([x for x in _lines(c) if x["world"] == 4]) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = _lines(c)
    starts = [(x["world"], x["rank"], x["replicas"], x["resizes"]) for x in lines
              if x["what"] == "start"]  # fmt: skip
    assert sorted(starts) == sorted(
        [(2, 0, "2", "0"), (2, 1, "2", "0"), (1, 0, "1", "1")]
        + [(4, r, "4", "2") for r in range(4)]
    )
    saved = [x for x in lines if x["what"] == "saved"]
    assert {(x["world"], x["rank"]) for x in saved} == {(2, 0), (2, 1), (1, 0)}
    notices = [json.loads(x["notice"]) for x in saved]
    assert {n["replicas"] for n in notices} == {1, 4} and all(n["deadline"] > 0 for n in notices)
    assert {x["local_rank"] for x in lines if x["world"] == 4} == {"0", "1", "2", "3"}
    queue = c.cli("queue", check=True).stdout
    assert any(line.split()[0] == str(job) and " 4 " in line for line in queue.splitlines())
    c.cli("cancel", str(job), check=True)
    assert c.wait(job)["state"] == "CANCELLED"


def test_a_job_that_ignores_the_resize_is_stopped_at_the_deadline(cluster: Cluster) -> None:
    c = cluster
    blocker = c.submit("--qos=normal", "--gpus=2", "--wrap", "sleep 300")
    c.wait(blocker, {"RUNNING"})
    job = _submit_elastic(c, "--resize-grace=2", "--export=ALL,IGNORE=1")
    _until(c, job, lambda j: j["state"] == "RUNNING" and j["replicas"] == 2)
    asked = time.monotonic()
    urgent = c.submit("--qos=high", "--gpus=1", "--wrap", "sleep 300")
    one = _until(c, job, lambda j: j["state"] == "RUNNING" and j["replicas"] == 1)
    assert time.monotonic() - asked >= 2  # the grace was given in full
    assert one["resizes"] == 1 and c.job(urgent)["state"] == "RUNNING"
    assert not [x for x in _lines(c) if x["what"] == "saved"]
    for other in (job, urgent, blocker):
        c.cli("cancel", str(other), check=True)


def test_elastic_options_are_checked_in_one_line(cluster: Cluster) -> None:
    c = cluster
    for args, says in [
        (["--elastic=4:2"], "needs 1 <= MIN <= MAX"),
        (["--elastic=1:2", "--ntasks=2"], "does not go with --elastic"),
        (["--elastic=1:2", "--gpus=2"], "give GPUs per replica with --gpus-per-task"),
        (["--resize-grace=10"], "applies to elastic jobs only"),
        (["--elastic=1:2", "--resize-signal=NOPE"], "unknown signal"),
    ]:
        done = c.cli("submit", *args, "--wrap", "true")
        assert done.returncode != 0, args
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
