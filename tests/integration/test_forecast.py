"""`podium queue --start` on the real daemon: pending jobs' expected starts from the
scheduler run forward, checked against when they really start; a held job and one
behind a job with no time limit get N/A; the same forecast over the API; a job that
reports its progress (`podium progress`) is expected to end where its rate says."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_permissions import _as, other_user
from tests.integration.test_slurm_commands import slurm
from tests.polling import poll

__all__ = ["other_user"]  # the fixture, used here by name

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = make_cluster(gpus=4, cpus=8, kill_wait=1.0)
    c.start()
    yield c
    teardown_cluster(c)


def _forecast(c: Cluster) -> dict[int, dict[str, object]]:
    rows = json.loads(c.cli("queue", "--start", "--json", check=True).stdout)
    return {int(r["job_id"]): r for r in rows}


def test_the_forecast_says_when_a_job_really_starts(cluster: Cluster) -> None:
    c = cluster
    short = c.submit("--gpus=2", "-t", "0:04", "--wrap", "sleep 300")  # killed at 4 s
    long = c.submit("--gpus=2", "-t", "10:00", "--wrap", "sleep 300")
    c.wait(short, {"RUNNING"})
    c.wait(long, {"RUNNING"})
    big = c.submit("--gpus=2", "-t", "1:00", "--wrap", "sleep 300")
    held = c.submit("--gpus=1", "--hold", "--wrap", "true")
    seen = poll(
        lambda: _forecast(c),
        lambda seen: big in seen and seen[big]["expected_start_epoch"] is not None,
        "the big job's expected start", 10,
    )  # fmt: skip
    started = c.job(short)["start_epoch"]
    expected = float(seen[big]["expected_start_epoch"])  # type: ignore[arg-type]
    assert abs(expected - (started + 4)) < 1.0, (expected, started)
    assert seen[big]["sched_node"] and len(seen[big]["sched_gpu_ids"]) == 2  # type: ignore[arg-type]
    assert seen[held]["expected_start_epoch"] is None
    shim = slurm(c, "squeue", "--start")  # Slurm's own command, as scripts call it
    assert shim.returncode == 0, shim.stderr
    head, *rows = shim.stdout.splitlines()
    assert head.split() == ["JOBID", "PARTITION", "NAME", "USER", "ST", "START_TIME", "NODES",
                            "SCHEDNODES", "NODELIST(REASON)"]  # fmt: skip
    by_id = {r.split()[0]: r.split() for r in rows}
    assert str(held) in by_id and str(long) not in by_id  # pending jobs only
    if str(big) in by_id:  # still pending (it starts about 4 s after the short job did)
        when = dt.datetime.fromtimestamp(expected).strftime("%Y-%m-%dT%H:%M:%S")
        assert by_id[str(big)][5] == when, (by_id, when)
    assert by_id[str(held)][5] == "N/A" and by_id[str(held)][7] == "(null)"
    real = c.wait(big, {"RUNNING"}, timeout=30)["start_epoch"]
    assert abs(real - expected) < 3.0, (real, expected)  # the limit, the kill, a pass
    table = c.cli("queue", "--start", check=True).stdout
    assert "START_TIME" in table and "N/A" in table
    for job_id in (long, big, held):
        c.cli("cancel", str(job_id), check=True)


def test_no_time_limit_means_no_forecast_behind_it(cluster: Cluster) -> None:
    c = cluster
    endless = c.submit("--gpus=4", "--wrap", "sleep 300")
    c.wait(endless, {"RUNNING"})
    behind = c.submit("--gpus=1", "-t", "1:00", "--wrap", "true")
    time.sleep(1.0)  # a pass has seen it
    assert _forecast(c)[behind]["expected_start_epoch"] is None
    with c.api() as api:
        answer = api.get("/v1/forecast").json()
    (record,) = answer["jobs"]
    nothing = {"expected_start": None, "expected_start_epoch": None, "node": None, "gpu_ids": []}
    assert {k: record[k] for k in ("job_id", *nothing)} == {"job_id": behind, **nothing}
    assert record["reason"] == "Resources"
    assert record["start_kind"] is None and "no time limit" in record["no_start_reason"]
    (blocker,) = record["blockers"]
    assert blocker["job_ids"] == [endless] and "no time limit" in blocker["text"]
    c.cli("cancel", str(endless), str(behind), check=True)


def test_show_says_why_a_job_waits_in_plain_words(cluster: Cluster) -> None:
    c = cluster
    holder = c.submit("--gpus=3", "-t", "20:00", "--wrap", "sleep 300")
    c.wait(holder, {"RUNNING"})
    waiting = c.submit("--gpus=2", "-t", "1:00", "--wrap", "true")
    after = c.submit("--gpus=1", f"--dependency=afterok:{waiting}", "--wrap", "true")
    shown = poll(lambda: c.cli("show", str(waiting), check=True).stdout,
                 lambda text: "why it waits:" in text, "why it waits", 10)  # fmt: skip
    user = c.job(holder)["user"]
    assert re.search(rf"when these end: job {holder} \({user}, ends in (19|20) min\)", shown)
    record = json.loads(c.cli("show", str(after), "--json", check=True).stdout)
    assert [b["text"] for b in record["blockers"]] == [
        f"It waits for job {waiting} (PENDING) to end successfully (afterok)."
    ]
    c.cli("cancel", str(holder), str(waiting), str(after), check=True)


def test_a_job_that_reports_its_progress_is_expected_to_end_by_it(
    cluster: Cluster, other_user: str
) -> None:
    c = cluster
    # 12 units of work, about a second each, under a 30-minute limit: its rate, not its
    # limit, says when its GPUs come free
    steps = "for i in $(seq 1 12); do podium progress $i --of 12 >/dev/null; sleep 1; done"
    worker = c.submit("--gpus=4", "-t", "30:00", "--wrap", steps)
    c.wait(worker, {"RUNNING"})
    waiting = c.submit("--gpus=2", "-t", "1:00", "--wrap", "true")
    poll(  # from its second report on, a rate, so an end
        lambda: _forecast(c).get(waiting, {}).get("expected_start_epoch"),
        lambda seen: seen is not None and float(seen) < time.time() + 600,
        "an expected start within 10 minutes", 20,
    )  # fmt: skip
    time.sleep(3)  # a few more reports: the rate settles
    expected = float(_forecast(c)[waiting]["expected_start_epoch"])  # type: ignore[arg-type]
    shown = c.cli("show", str(worker), check=True).stdout
    assert re.search(r"progress: \d+ % \(\d+ of 12\), expected to end at ", shown), shown
    why = c.cli("show", str(waiting), check=True).stdout
    assert f"job {worker} (root, ends in" in why and "by its progress" in why, why
    # bad reports are one line each, and change nothing
    over = c.cli("progress", "13", "--of", "12", "--job", str(worker))
    assert over.returncode != 0 and "cannot exceed the total" in over.stderr, over.stderr
    assert len(over.stderr.strip().splitlines()) == 1
    idle = c.cli("progress", "1", "--of", "2", "--job", str(waiting))
    assert idle.returncode != 0 and "only a running job reports progress" in idle.stderr
    theirs = _as(c, other_user, "progress", "1", "--of", "2", "--job", str(worker))
    assert theirs.returncode == 1 and "belongs to root" in theirs.stderr, theirs.stderr
    outside = c.cli("progress", "1", "--of", "2", env={**c.env, "PODIUM_JOB_ID": ""})
    assert outside.returncode != 0 and "run it inside a job" in outside.stderr
    real = c.wait(waiting, {"RUNNING", "COMPLETED"}, timeout=60)["start_epoch"]
    assert abs(real - expected) < 4.0, (real, expected)  # the rate, the last sleep, a pass
    assert c.wait(worker)["state"] == "COMPLETED"
