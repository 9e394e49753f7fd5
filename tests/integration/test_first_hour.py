"""A Slurm user's first hour with Podium (issue 26, items 12-16), through the real CLI
against a real daemon: help that lists every option, the YAML job file, squeue's
`-t all`, and what `podium nodes` says the cgroups enforce."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Cluster
from tests.polling import poll

pytestmark = pytest.mark.integration


def test_submit_help_lists_sbatchs_options_in_sbatchs_groups(shared_cluster: Cluster) -> None:
    c = shared_cluster
    for flag in ("--help", "-h"):
        done = c.cli("submit", flag)
        assert done.returncode == 0 and not done.stderr, done.stderr
        out = done.stdout
        for line in (
            "Parallel run options:",
            "Constraint options:",
            "GPU scheduling options:",
            "  -G, --gpus=n ",
            "  -o, --output=out ",
            "  -t, --time=minutes ",
            "      --auto-resume=N ",
            "      --container-image=image ",
        ):
            assert line in out, (flag, line)
    # A script's own -h is the script's: help only where options are read.
    script = c.script("echo args: $*\n", "help.sh")
    job = c.submit("-o", "help-%j.out", str(script), "-h")
    c.wait(job)
    assert (c.work / f"help-{job}.out").read_text() == "args: -h\n"


def test_a_job_file_takes_the_names_a_user_tries(shared_cluster: Cluster) -> None:
    c = shared_cluster
    (c.work / "sub").mkdir(exist_ok=True)
    c.script('echo "ran $SLURM_JOB_NAME with $1"\n', "sub/train.sh")
    (c.work / "sub" / "job.yaml").write_text(
        "job_name: by-path\noutput: by-path-%j.out\nscript: train.sh\nargs: [lr=3]\n"
    )
    job = int(c.cli("submit", "--parsable", "-f", "sub/job.yaml", check=True).stdout)
    assert c.wait(job)["state"] == "COMPLETED"
    assert (c.work / f"by-path-{job}.out").read_text() == "ran by-path with lr=3\n"
    (c.work / "wrap.yaml").write_text("job-name: wrapped\noutput: w-%j.out\nwrap: echo w\n")
    job = int(c.cli("submit", "--parsable", "-f", "wrap.yaml", check=True).stdout)
    c.wait(job)
    assert (c.work / f"w-{job}.out").read_text() == "w\n"
    (c.work / "bad.yaml").write_text("job-nme: x\ncommand: true\n")
    bad = c.cli("submit", "-f", "bad.yaml")
    assert bad.returncode == 2 and "(did you mean job-name?)" in bad.stderr
    assert bad.stderr.count("\n") == 1
    (c.work / "missing.yaml").write_text("script: nowhere.sh\n")
    bad = c.cli("submit", "-f", "missing.yaml")
    assert bad.returncode == 2 and "cannot read the script" in bad.stderr
    assert str(c.work / "nowhere.sh") in bad.stderr


def test_queue_takes_state_all_as_squeue_does(shared_cluster: Cluster) -> None:
    c = shared_cluster
    done = c.submit("-J", "all-states", "--wrap", "true")
    c.wait(done)
    listed = json.loads(c.cli("queue", "-t", "all", "--json", check=True).stdout)
    assert any(j["job_id"] == done and j["state"] == "COMPLETED" for j in listed)
    assert c.cli("queue", "--state=ALL", check=True).returncode == 0
    bad = c.cli("queue", "-t", "RUNING")
    assert bad.returncode == 2 and "expected ALL or one of" in bad.stderr


def test_nodes_say_what_the_cgroups_enforce(shared_cluster: Cluster) -> None:
    c = shared_cluster
    out = c.cli("nodes", check=True).stdout
    assert "LIMIT" in out and "ENFORCEMENT" in out
    node = json.loads(c.cli("nodes", "--json", check=True).stdout)[0]
    for resource, how in node["enforcement"].items():
        row = next(line for line in out.splitlines() if f" {resource} " in line)
        assert how.split(":")[0] in row


def test_a_job_files_unquoted_time_is_the_time_written(shared_cluster: Cluster) -> None:
    """Issue 44, item 1: `time: 2:00:00` was a 5-day limit (YAML 1.1's base-60 7200,
    read as minutes) and `time: 1:30` 90 minutes; now they are what sbatch reads."""
    c = shared_cluster
    for written, seconds in (("2:00:00", 7200), ("1:30", 90), ("45", 2700), ("1-0", 86400)):
        (c.work / "t.yaml").write_text(f"time: {written}\nhold: yes\ncommand: true\n")
        job = int(c.cli("submit", "--parsable", "-f", "t.yaml", check=True).stdout)
        assert c.job(job)["time_limit_s"] == seconds, written
        c.cli("cancel", str(job), check=True)
    (c.work / "t.yaml").write_text("time:\ncommand: true\n")
    bad = c.cli("submit", "-f", "t.yaml")
    assert bad.returncode == 2 and "'time': expected one value" in bad.stderr


def test_up_on_a_running_daemon_refuses_what_it_would_not_do(shared_cluster: Cluster) -> None:
    """Issue 44, item 2: `podium up --http HOST:PORT` on a running daemon printed
    "Podium is up" and listened nowhere; the README's next command then failed."""
    c = shared_cluster
    again = c.cli("up")
    assert again.returncode == 0 and "Podium is up" in again.stdout  # nothing asked: fine
    for args, words in (
        (("--http", "127.0.0.1:18999"), "it has no HTTP listener (--http 127.0.0.1:18999)"),
        (("--gpus", "2"), "it has 4 GPUs, not --gpus 2"),
        (("--cpus", "3"), "it has 64 CPUs, not --cpus 3"),
    ):
        refused = c.cli("up", *args)
        assert refused.returncode != 0 and words in refused.stderr, refused.stderr
        assert "podium down" in refused.stderr and refused.stderr.count("\n") == 1
    assert c.cli("up", "--gpus", "4").returncode == 0  # what it has: fine


def test_refusals_say_the_state_and_the_task_as_the_queue_shows_them(
    shared_cluster: Cluster,
) -> None:
    """Issue 44, item 3: `podium requeue` of a COMPLETED job said "is pending"; an
    array task was named by its internal id."""
    c = shared_cluster
    done = c.submit("--wrap", "true")
    c.wait(done)
    refused = c.cli("requeue", str(done))
    assert f"job {done} is completed: only a running job is requeued" in refused.stderr
    array = c.submit("--array=0-1", "--wrap", "true")
    poll(
        lambda: [j for j in json.loads(c.cli("queue", "--all", "--json").stdout)
                 if j["array_job_id"] == array and j["state"] == "COMPLETED"],
        lambda done: len(done) == 2, "both array tasks completed", 30,
    )  # fmt: skip
    refused = c.cli("requeue", f"{array}_0")
    assert f"job {array}_0 is completed" in refused.stderr, refused.stderr
    held = c.submit("--hold", "--array=0-2", "--wrap", "true")
    released = c.cli("release", f"{held}_1", check=True)
    assert released.stdout.strip() == f"released {held}_1", released.stdout
    cancelled = c.cli("cancel", str(held), check=True)
    assert cancelled.stdout.split()[0] == "cancelled" and f"{held}_" in cancelled.stdout
