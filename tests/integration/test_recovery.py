"""The daemon can die (kill -9) or stop: accepted jobs stay, running jobs are re-adopted,
ends that happened meanwhile are recorded, and no job is launched twice."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time

import psutil
import pytest

from tests.integration.conftest import Cluster
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _launch_counts(c: Cluster) -> dict[str, int]:
    path = c.work / "launches.txt"
    counts: dict[str, int] = {}
    for line in path.read_text().split() if path.exists() else []:
        counts[line] = counts.get(line, 0) + 1
    return counts


def _supervisor_pid(c: Cluster, job_id: int) -> int:
    path = c.home / "jobs" / str(job_id) / "started.json"
    wait_until(path.exists, f"{path} to be written", 30)
    return int(json.loads(path.read_text())["pid"])


def test_kill9_and_restart_loses_nothing(cluster: Cluster) -> None:
    c = cluster
    # Jobs run until the test opens their gate, so the check does not race the clock:
    # the short one's opens once the daemon is down (a 0.5 s sleep could end, and be
    # seen by the daemon, before a loaded machine got to the kill).
    body = (
        "echo $PODIUM_JOB_ID >> launches.txt\n"
        'if [ "$1" = sleep ]; then sleep 0.2; exit; fi\n'
        'while [ ! -e "$1-open" ]; do sleep 0.1; done\n'
    )
    script = c.script(body, "rec.sh")
    long_a = c.submit("--gpus=2", str(script), "gate")
    short = c.submit("--gpus=1", str(script), "short")  # ends while the daemon is down
    long_b = c.submit("--gpus=1", str(script), "gate")
    pending = c.submit("--gpus=4", str(script), "sleep")
    for job_id in (long_a, short, long_b):
        c.wait(job_id, {"RUNNING"})
    supervisors = {j: _supervisor_pid(c, j) for j in (long_a, short, long_b)}

    c.kill9()
    quick = dict(c.env, PODIUM_RETRY_S="1")  # not the 30 s a restart is waited for
    assert c.cli("queue", env=quick).returncode == 1  # nobody answers, and says so
    for pid in supervisors.values():
        assert psutil.pid_exists(pid), "jobs must outlive the daemon"
    (c.work / "short-open").touch()
    ended = c.home / "jobs" / str(short) / "result.json"  # its supervisor's record
    wait_until(ended.exists, f"job {short} ends with no daemon to see it")

    c.start()
    jobs = {
        j["job_id"]: j for j in json.loads(c.cli("queue", "--all", "--json", check=True).stdout)
    }
    assert set(jobs) >= {long_a, short, long_b, pending}
    assert jobs[short]["state"] == "COMPLETED" and jobs[short]["end_time"] is not None
    assert jobs[long_a]["state"] == "RUNNING" and jobs[long_b]["state"] == "RUNNING"
    assert jobs[pending]["state"] == "PENDING"
    (c.work / "gate-open").touch()
    for job_id in (long_a, long_b, pending):
        assert c.wait(job_id, timeout=30)["state"] == "COMPLETED"
    assert c.job(long_a)["end_time"] is not None
    assert _launch_counts(c) == {str(j): 1 for j in (long_a, short, long_b, pending)}


def test_submit_is_durable_when_it_returns(cluster: Cluster) -> None:
    c = cluster
    ids = [c.submit("--hold", "--wrap", "true") for _ in range(20)]
    c.kill9()
    c.start()
    jobs = json.loads(c.cli("queue", "--json", check=True).stdout)
    assert {j["job_id"] for j in jobs} >= set(ids)


def test_down_keeps_running_jobs_and_up_adopts_them(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--wrap", "sleep 6; echo finished")
    c.wait(job_id, {"RUNNING"})
    result = c.cli("down", check=True)
    assert "1 running job(s) keep running" in result.stdout
    pid = _supervisor_pid(c, job_id)
    assert psutil.pid_exists(pid)
    c.start()
    job = c.wait(job_id, timeout=20)
    assert job["state"] == "COMPLETED"
    assert (c.work / f"slurm-{job_id}.out").read_text() == "finished\n"


def test_crash_between_commit_and_launch_launches_once(cluster: Cluster) -> None:
    """A job marked RUNNING whose supervisor never started goes back to the queue."""
    c = cluster
    script = c.script("echo $PODIUM_JOB_ID >> launches.txt\n", "once.sh")
    job_id = c.submit("--hold", str(script))
    c.stop()
    db = sqlite3.connect(c.home / "podium.db")
    db.execute(
        "UPDATE jobs SET state='RUNNING', held=0, start_time=?, node='node0', gpu_ids='[]' "
        "WHERE job_id=?",
        (time.time(), job_id),
    )
    db.commit()
    db.close()
    c.start()
    assert c.wait(job_id, timeout=20)["state"] == "COMPLETED"
    assert _launch_counts(c) == {str(job_id): 1}
    kinds = [e["kind"] for e in c.job(job_id)["events"]]
    assert "relaunch" in kinds


def test_supervisor_killed_is_node_fail(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--wrap", "sleep 30")
    pid = _supervisor_pid(c, job_id)
    os.kill(pid, 9)
    job = c.wait(job_id, timeout=20)
    assert job["state"] == "NODE_FAIL" and job["reason"] == "supervisor vanished"


def test_second_daemon_for_same_home_is_refused(cluster: Cluster) -> None:
    c = cluster
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "podium.server.daemon", "--home", str(c.home)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1
    assert "already running" in result.stderr
    assert c.alive()


def _kill_session(sid: int) -> None:
    """SIGKILL every process of a supervisor's session (the supervisor and its job),
    as a machine going down would end them."""
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid:
                proc.kill()
        except (ProcessLookupError, psutil.Error):
            continue
    psutil.wait_procs([p for p in psutil.process_iter() if p.pid == sid], timeout=10)


@pytest.mark.skipif(os.geteuid() != 0, reason="job state goes to a tmpfs for a root daemon")
def test_job_state_lives_on_a_tmpfs_until_the_end_is_recorded(cluster: Cluster) -> None:
    from podium.run.rundir import mount_type

    c = cluster
    jobs = c.home / "jobs"
    assert jobs.is_symlink() and mount_type(str(jobs)) == "tmpfs"
    job_id = c.submit("--wrap", "sleep 1")
    c.wait(job_id, {"RUNNING"})
    assert (jobs / str(job_id) / "started.json").exists()
    assert c.wait(job_id)["state"] == "COMPLETED"
    wait_until(lambda: not (jobs / str(job_id)).exists(), "the run's directory to go", 10)
    assert not (jobs / str(job_id)).exists()  # runtime state, let go once recorded
    assert c.cli("acct", "--json", check=True).stdout.count('"COMPLETED"') >= 1


@pytest.mark.skipif(os.geteuid() != 0, reason="job state goes to a tmpfs for a root daemon")
def test_runs_lost_with_a_restarted_machine_fail_and_are_not_run_again_unknowingly(
    cluster: Cluster,
) -> None:
    c = cluster
    script = c.script("echo $PODIUM_JOB_ID >> launches.txt\nsleep 300\n", "long.sh")
    plain = c.submit(str(script))
    resumable = c.submit("--auto-resume=1", str(script))
    sessions = [_supervisor_pid(c, j) for j in (plain, resumable)]
    c.stop()  # jobs keep running; then the machine goes down with them
    for sid in sessions:
        _kill_session(sid)
    shutil.rmtree((c.home / "jobs").resolve())  # a tmpfs comes back empty
    c.start()
    failed = c.wait(plain, timeout=20)
    assert failed["state"] == "NODE_FAIL" and "the machine restarted" in failed["reason"]
    again = c.wait(resumable, {"RUNNING"}, timeout=20)  # auto-resume: a second run, counted
    assert again["restart_count"] == 1
    wait_until(lambda: _launch_counts(c).get(str(resumable)) == 2, "a second launch", 10)
    assert _launch_counts(c) == {str(plain): 1, str(resumable): 2}
    c.cli("cancel", str(resumable), check=True)
