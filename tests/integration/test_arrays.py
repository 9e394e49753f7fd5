"""Job arrays as Slurm keeps them: one record for the tasks not yet started (accepted
in O(1), listed as 12_[4-9%2]), a task split off with a record of its own when it
starts or is acted on alone, the array's own record becoming its last task."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_permissions import _as, other_user

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest


def _records(c: Cluster, *options: str) -> list[dict[str, object]]:
    return list(json.loads(c.cli("queue", "--all", "--json", *options, check=True).stdout))


def _of(c: Cluster, array: int, *options: str) -> list[dict[str, object]]:
    return [j for j in _records(c, *options) if j["array_job_id"] == array]


def test_a_big_array_is_one_record_until_its_tasks_start(cluster: Cluster) -> None:
    c = cluster
    started = time.monotonic()
    array = c.submit("--hold", "--array=0-999%4", "-o", "/dev/null", "--wrap", "true")
    submit_s = time.monotonic() - started
    (only,) = _of(c, array)
    assert only["job_id"] == array and only["display_id"] == f"{array}_[0-999%4]"
    assert only["array_task_string"] == "0-999%4" and only["state"] == "PENDING"
    assert len(_of(c, array, "--array")) == 1000  # squeue -r: one a task
    assert f"{array}_[0-999%4]" in c.cli("queue", check=True).stdout
    c.cli("cancel", str(array), check=True)
    assert submit_s < 10  # generous: a thousand rows are not written at submit


def test_tasks_start_lowest_first_and_the_array_record_is_the_last(cluster: Cluster) -> None:
    c = cluster
    array = c.submit("--array=1-5", "-o", "arr-%A_%a.out", "--wrap", "echo $SLURM_JOB_ID")
    tasks = c.wait_array(array, 5)
    assert sorted(tasks) == [1, 2, 3, 4, 5]
    assert tasks[5]["job_id"] == array  # the array's record took the last task
    assert all(t["state"] == "COMPLETED" for t in tasks.values())
    for index, task in tasks.items():  # each task ran with its own job id
        out = (c.work / f"arr-{array}_{index}.out").read_text().strip()
        assert out == str(task["job_id"])
    assert [j for j in _of(c, array) if j["array_task_id"] is None] == []


def test_a_task_acted_on_alone_is_split_off_and_the_rest_wait_on(cluster: Cluster) -> None:
    c = cluster
    array = c.submit("--hold", "--array=0-9", "--wrap", "true")
    c.cli("cancel", f"{array}_3", check=True)
    c.cli("hold", f"{array}_5", check=True)  # already held with the array: split anyway
    shown = c.job(array)
    assert shown["array_task_string"] == "0-2,4,6-9"
    cancelled = json.loads(c.cli("show", f"{array}_3", "--json", check=True).stdout)
    assert cancelled["state"] == "CANCELLED" and cancelled["array_task_id"] == 3
    waiting = json.loads(c.cli("show", f"{array}_7", "--json", check=True).stdout)
    assert waiting["job_id"] == array  # still in the array's record: that record
    missing = c.cli("cancel", f"{array}_10")
    assert missing.returncode != 0 and f"no array task {array}_10" in missing.stderr
    c.cli("release", f"{array}_5", check=True)  # task 5 alone runs
    done = c.wait_array(array, 2)  # 3 (cancelled) and 5
    assert done[5]["state"] == "COMPLETED" and done[3]["state"] == "CANCELLED"
    assert c.job(array)["state"] == "PENDING" and c.job(array)["held"]
    c.cli("release", str(array), check=True)
    tasks = c.wait_array(array, 10)
    assert sorted(i for i, t in tasks.items() if t["state"] == "COMPLETED") == [
        0, 1, 2, 4, 5, 6, 7, 8, 9,
    ]  # fmt: skip


def test_a_dependency_on_an_array_waits_for_all_its_tasks(cluster: Cluster) -> None:
    c = cluster
    array = c.submit("--array=0-3%2", "--wrap", "sleep 0.3")
    after = c.submit(f"--dependency=afterok:{array}", "-o", "after.out", "--wrap", "echo done")
    tasks = c.wait_array(array, 4)
    job = c.wait(after)
    assert job["state"] == "COMPLETED"
    last_end = max(t["end_epoch"] for t in tasks.values())
    assert job["start_epoch"] >= last_end


def test_another_user_cannot_split_or_touch_my_array_tasks(
    cluster: Cluster, other_user: str
) -> None:
    c = cluster
    array = c.submit("--hold", "--array=0-4", "--wrap", "true")
    for verb in ("cancel", "hold", "release"):
        refused = _as(c, other_user, verb, f"{array}_2")
        assert refused.returncode != 0 and "belongs to" in refused.stderr, refused.stderr
    assert c.job(array)["array_task_string"] == "0-4"  # nothing was split for them
    c.cli("cancel", str(array), check=True)


def test_submit_wait_on_an_array_waits_for_every_task_and_gives_the_worst_code(
    cluster: Cluster,
) -> None:
    c = cluster
    result = c.cli(
        "submit", "--wait", "--parsable", "--array=0-2%1", "-o", "/dev/null",
        "--wrap", 'sleep 0.2; exit $(( SLURM_ARRAY_TASK_ID == 1 ? 3 : 0 ))',
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    array = int(result.stdout.strip())
    states = {i: t["state"] for i, t in c.wait_array(array, 3, timeout=5).items()}
    assert states == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}


def test_array_tasks_write_where_sbatch_would_name_them(cluster: Cluster) -> None:
    """Issue 26, item 14: an array's default output is slurm-%A_%a.out (as sbatch's
    default), a plain job's slurm-%j.out (issue 27: sbatch's names)."""
    c = cluster
    array = c.submit("--array=1-3", "--wrap", "echo task $SLURM_ARRAY_TASK_ID")
    c.wait_array(array, 3)
    for task in (1, 2, 3):
        assert (c.work / f"slurm-{array}_{task}.out").read_text() == f"task {task}\n"
    plain = c.submit("--wrap", "echo plain")
    c.wait(plain)
    assert (c.work / f"slurm-{plain}.out").read_text() == "plain\n"
