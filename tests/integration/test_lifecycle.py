"""Running jobs: time limits, cancel, signals, hold, dependencies, drain, nodes, acct, logs."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest

from tests.integration.conftest import (
    PODIUM,
    Cluster,
    make_cluster,
    open_the_blocker,
    qos_trio_behind_a_blocker,
    teardown_cluster,
)
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def test_time_limit_sigterm_then_sigkill(cluster: Cluster) -> None:
    c = cluster
    script = c.script(
        "#SBATCH --time=0:02 -o tl-%j.out\n"
        "trap 'echo got-term' TERM\n"
        "while true; do sleep 0.1; done\n",
        "tl.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id, timeout=30)
    assert job["state"] == "TIMEOUT"
    assert job["signal"] == signal.SIGKILL  # ignored SIGTERM, killed after the grace time
    assert 2.0 <= job["elapsed_s"] < 6.0
    assert "got-term" in (c.work / f"tl-{job_id}.out").read_text()


def test_time_limit_job_that_exits_on_sigterm(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--time=0:01", "--wrap", "sleep 30")
    job = c.wait(job_id, timeout=30)
    assert job["state"] == "TIMEOUT" and job["signal"] == signal.SIGTERM


def test_cancel_running_and_pending(cluster: Cluster) -> None:
    c = cluster
    running = c.submit("--gpus=4", "--wrap", "sleep 60")
    c.wait(running, {"RUNNING"})
    pending = c.submit("--gpus=1", "--wrap", "sleep 60")
    assert c.job(pending)["state"] == "PENDING"
    result = c.cli("cancel", str(running), str(pending), check=True)
    assert str(running) in result.stdout and str(pending) in result.stdout
    assert c.wait(pending)["state"] == "CANCELLED"
    job = c.wait(running, timeout=20)
    assert job["state"] == "CANCELLED" and job["signal"] == signal.SIGTERM


def test_cancel_by_filters(cluster: Cluster) -> None:
    c = cluster
    ids = [c.submit("--hold", "-J", name, "--wrap", "true") for name in ("keep", "drop", "drop")]
    c.cli("cancel", "--name", "drop", "--state", "PENDING", check=True)
    states = [c.job(i)["state"] for i in ids]
    assert states == ["PENDING", "CANCELLED", "CANCELLED"]
    empty = c.cli("cancel", check=False)
    assert empty.returncode == 2 and "--user, --name or --state" in empty.stderr


def test_signal_before_time_limit(cluster: Cluster) -> None:
    c = cluster
    script = c.script(
        # B: the batch shell's own trap (without B:, Slurm signals only the steps;
        # see test_steps.py)
        "#SBATCH --time=0:03 --signal=B:USR1@2 -o sig-%j.out\n"
        "trap 'echo got-usr1; exit 0' USR1\n"
        "while true; do sleep 0.1; done\n",
        "sig.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id, timeout=30)
    assert "got-usr1" in (c.work / f"sig-{job_id}.out").read_text()
    assert job["state"] == "COMPLETED" and job["elapsed_s"] < 3


def test_exit_code_and_signal_recorded(cluster: Cluster) -> None:
    c = cluster
    job = c.wait(c.submit("--wrap", "kill -SEGV $$"))
    assert job["state"] == "FAILED" and job["signal"] == signal.SIGSEGV
    job = c.wait(c.submit("--wrap", "exit 42"))
    assert job["exit_code"] == 42


def test_a_job_that_cannot_start_says_why_where_users_look(cluster: Cluster) -> None:
    """Issue 46: a launch failure is written into the job's stderr file (as slurmstepd
    writes its errors), ends FAILED with the errno as exit code (execve's ENOENT: 2),
    and reads JobLaunchFailure in squeue and sacct, not FAILED 0:0 with an empty file."""
    c = cluster
    script = c.work / "bad-interpreter.sh"
    script.write_text("#!/no/such/shell\necho never\n")
    job_id = c.submit("-o", "bad-%j.out", "-e", "bad-%j.err", str(script))
    job = c.wait(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 2, job
    why = "cannot run the job's script: its #! line names /no/such/shell: No such file"
    assert why in job["reason"]
    err = (c.work / f"bad-{job_id}.err").read_text()
    assert err == f"podium: error: {job['reason']}\n"
    assert (c.work / f"bad-{job_id}.out").read_text() == ""
    shims = c.home / "shims"
    subprocess.run([PODIUM, "slurm-commands", "install", str(shims)], env=c.env, check=True,
                   capture_output=True)  # fmt: skip

    def slurm(*argv: str) -> str:
        done = subprocess.run([str(shims / argv[0]), *argv[1:]], env=c.env, capture_output=True,
                              text=True, timeout=30, check=True)  # fmt: skip
        return done.stdout

    sacct = slurm("sacct", "-j", str(job_id), "-X", "-n", "-P", "-o", "State,ExitCode,Reason")
    assert sacct == "FAILED|2:0|JobLaunchFailure\n"
    squeue = slurm("squeue", "-t", "all", "-j", str(job_id), "-h", "-o", "%T %r")
    assert squeue == "FAILED JobLaunchFailure\n"
    acct = c.cli("acct", "--json", check=True).stdout
    [mine] = [j for j in json.loads(acct) if j["job_id"] == job_id]
    assert mine["exit_code"] == 2 and mine["reason"] == job["reason"]


def test_hold_and_release(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--hold", "--wrap", "true")
    job = c.wait_reason(job_id, "JobHeldUser")
    assert job["state"] == "PENDING" and job["held"]
    c.cli("release", str(job_id), check=True)
    assert c.wait(job_id)["state"] == "COMPLETED"
    other = c.submit("--begin=now+60", "--wrap", "true")
    c.cli("hold", str(other), check=True)
    assert c.job(other)["reason"] == "JobHeldUser"
    bad = c.cli("hold", str(job_id))
    assert bad.returncode == 2 and "nothing to hold" in bad.stderr


def test_priority_order_and_reasons() -> None:
    """Slurm's multifactor priority (`scheduler.order: multifactor`): QoS orders the
    queue. The default order, least attained service, is tested in test_las."""
    c = make_cluster(extra="scheduler: {order: multifactor}\n")
    c.start()
    try:
        low, normal, high = qos_trio_behind_a_blocker(c)
        c.wait_reason(low, "Priority")
        reasons = {j: c.job(j)["reason"] for j in (low, normal, high)}
        assert reasons[high] == "Resources"
        assert reasons[normal] == "Priority" and reasons[low] == "Priority"
        open_the_blocker(c)
        jobs = {j: c.wait(j, timeout=30) for j in (low, normal, high)}
        assert jobs[high]["start_time"] <= jobs[normal]["start_time"] <= jobs[low]["start_time"]
    finally:
        teardown_cluster(c)


def test_gpus_never_oversubscribed(cluster: Cluster) -> None:
    c = cluster
    ids = [c.submit(f"--gpus={n}", "--wrap", "sleep 0.3") for n in (3, 2, 1, 4, 1, 2)]
    jobs = [c.wait(i, timeout=60) for i in ids]
    events = sorted(
        [(j["start_time"], +j["gpus"], j["gpu_ids"]) for j in jobs]
        + [(j["end_time"], -j["gpus"], []) for j in jobs],
        key=lambda e: (e[0], e[1]),
    )
    in_use = 0
    for _, delta, _ in events:
        in_use += delta
        assert in_use <= 4


def test_dependencies(cluster: Cluster) -> None:
    c = cluster
    first = c.submit("--wrap", "sleep 0.5")
    ok = c.submit(f"--dependency=afterok:{first}", "--wrap", "true")
    notok = c.submit(f"--dependency=afternotok:{first}", "--wrap", "true")
    any_ = c.submit(f"--dependency=afterany:{first}", "--wrap", "true")
    assert c.job(ok)["reason"] in ("Dependency", "None")
    assert c.wait(ok)["start_time"] >= c.wait(first)["end_time"]
    assert c.wait(any_)["state"] == "COMPLETED"
    job = c.wait_reason(notok, "DependencyNeverSatisfied")
    assert job["state"] == "PENDING"
    killed = c.submit(
        f"--dependency=afternotok:{first}", "--kill-on-invalid-dep=yes", "--wrap", "true"
    )
    assert c.wait(killed)["state"] == "CANCELLED"
    missing = c.cli("submit", "--dependency=afterok:99999", "--wrap", "true")
    assert missing.returncode == 2 and "no job 99999" in missing.stderr


def test_singleton(cluster: Cluster) -> None:
    c = cluster
    a = c.submit("-J", "solo", "--dependency=singleton", "--wrap", "sleep 0.5")
    b = c.submit("-J", "solo", "--dependency=singleton", "--wrap", "sleep 0.1")
    ja, jb = c.wait(a), c.wait(b)
    assert jb["start_time"] >= ja["end_time"]


def test_drain_and_resume(cluster: Cluster) -> None:
    c = cluster
    running = c.submit("--gpus=1", "--wrap", "sleep 1")
    c.wait(running, {"RUNNING"})
    result = c.cli("drain", "node0", "--reason", "maintenance", check=True)
    assert "draining" in result.stdout
    waiting = c.submit("--gpus=1", "--wrap", "true")
    assert c.wait_reason(waiting, "ReqNodeNotAvail")["state"] == "PENDING"
    assert c.wait(running)["state"] == "COMPLETED"  # a drained node runs what it has
    nodes = json.loads(c.cli("nodes", "--json", check=True).stdout)
    assert nodes[0]["state"] == "drained" and nodes[0]["reason"] == "maintenance"
    c.cli("resume", "node0", check=True)
    assert c.wait(waiting)["state"] == "COMPLETED"
    again = c.cli("resume", "node0")
    assert again.returncode == 2 and "neither drained nor fenced" in again.stderr


def test_nodes_show_gpu_owners(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--gpus=3", "--wrap", "sleep 5")
    c.wait(job_id, {"RUNNING"})
    node = json.loads(c.cli("nodes", "--json", check=True).stdout)[0]
    assert node["state"] == "mixed" and node["gpus_used"] == 3 and node["gpus_total"] == 4
    owners = {g["index"]: g["job_id"] for g in node["gpus"]}
    assert sorted(i for i, j in owners.items() if j == job_id) == sorted(c.job(job_id)["gpu_ids"])
    table = c.cli("nodes", check=True).stdout
    assert "node0" in table and "mixed" in table and "3/4" in table
    c.cli("cancel", str(job_id), check=True)


def test_acct_filters(cluster: Cluster) -> None:
    c = cluster
    done = c.wait(c.submit("--gpus=2", "--wrap", "sleep 0.3"))
    failed = c.wait(c.submit("--wrap", "exit 1"))
    rows = json.loads(c.cli("acct", "--json", check=True).stdout)
    by_id = {r["job_id"]: r for r in rows}
    assert by_id[done["job_id"]]["gpu_seconds"] == pytest.approx(
        2 * by_id[done["job_id"]]["elapsed_s"], abs=0.002
    )
    only_failed = json.loads(c.cli("acct", "--json", "--state", "FAILED", check=True).stdout)
    assert [r["job_id"] for r in only_failed] == [failed["job_id"]]
    future = json.loads(c.cli("acct", "--json", "--since", "2999-01-01", check=True).stdout)
    assert future == []
    mine = json.loads(c.cli("acct", "--json", "--user", done["user"], check=True).stdout)
    assert {r["job_id"] for r in mine} >= {done["job_id"], failed["job_id"]}
    table = c.cli("acct", check=True).stdout
    assert "GPU_SEC" in table and "COMPLETED" in table
    bad = c.cli("acct", "--since", "yesterday-ish")
    assert bad.returncode == 2 and "invalid time" in bad.stderr


def test_queue_table_and_reasons(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--hold", "-J", "tabled", "--wrap", "true")
    out = c.cli("queue", check=True).stdout
    assert "tabled" in out and "PENDING" in out and "(JobHeldUser)" in out
    c.cli("cancel", str(job_id), check=True)


def test_logs_follow(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--wrap", "for i in 1 2 3; do echo line$i; sleep 0.3; done")
    proc = subprocess.run(
        [c.env["PATH"].split(":")[0] + "/podium", "logs", "-f", str(job_id)],
        capture_output=True,
        text=True,
        env=c.env,
        timeout=30,
    )
    assert proc.stdout == "line1\nline2\nline3\n"
    assert c.cli("logs", str(job_id), check=True).stdout == "line1\nline2\nline3\n"


def test_mail_is_sent_through_the_configured_command() -> None:
    from tests.integration.conftest import mail_recorder

    c = make_cluster()
    log = mail_recorder(c)
    c.start()
    try:
        job_id = c.submit("--mail-type=BEGIN,END", "--mail-user=ops@example.org", "--wrap", "true")
        c.wait(job_id)
        wait_until(lambda: log.exists() and log.read_text().count("\n") >= 2,
                   f"two lines in {log}", 10)  # fmt: skip
        lines = log.read_text().splitlines()
        assert any(
            f"job {job_id}" in ln and "began" in ln and "ops@example.org" in ln for ln in lines
        )
        assert any(f"job {job_id}" in ln and "ended COMPLETED" in ln for ln in lines)
    finally:
        teardown_cluster(c)


def test_input_file_feeds_stdin(cluster: Cluster) -> None:
    c = cluster
    (c.work / "in.txt").write_text("fed through stdin\n")
    job_id = c.submit("--input=in.txt", "-o", "in-%j.out", "--wrap", "cat")
    c.wait(job_id)
    assert (c.work / f"in-{job_id}.out").read_text() == "fed through stdin\n"
