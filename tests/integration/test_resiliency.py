"""The health agent in the real daemon: injected faults fence GPUs, jobs on them are
requeued (auto-resume) avoiding them, the ladder returns what recovers to service.
Also the exit-code policy, hang detection and the other injected faults."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster, health_cluster, teardown_cluster
from tests.polling import wait_until

pytestmark = pytest.mark.integration

RECORD_RUN = """
echo "run $PODIUM_RESTART_COUNT gpus $CUDA_VISIBLE_DEVICES" >> {work}/runs-$PODIUM_JOB_ID
while [ ! -e {work}/gate-$PODIUM_JOB_ID ]; do sleep 0.1; done
"""


def nodes(c: Cluster) -> dict[str, Any]:
    data: list[dict[str, Any]] = json.loads(c.cli("nodes", "--json", check=True).stdout)
    return data[0]


def gpu_health(c: Cluster, gpu: int) -> dict[str, Any]:
    health: dict[str, Any] = nodes(c)["gpus"][gpu]["health"]
    return health


def until(predicate: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    return wait_until(predicate, what or str(predicate), timeout)


def runs(c: Cluster, job_id: int) -> list[str]:
    path = c.work / f"runs-{job_id}"
    return path.read_text().splitlines() if path.exists() else []


def test_xid_fences_one_gpu_and_requeues_only_its_job(make: Callable[..., Cluster]) -> None:
    c = make()
    script = c.script(RECORD_RUN.format(work=c.work))
    job = c.submit("--gpus=2", "--auto-resume=2", str(script))
    other = c.submit("--gpus=1", str(script))
    c.wait(job, {"RUNNING"})
    c.wait(other, {"RUNNING"})
    until(lambda: runs(c, job) and runs(c, other), what="both jobs to start")
    bad = int(runs(c, job)[0].split()[-1].split(",")[0])
    other_gpu = runs(c, other)[0].split()[-1]

    c.cli("inject", "xid", "--gpu", str(bad), "--code", "79", check=True)

    until(lambda: len(runs(c, job)) == 2, what="the job to restart")
    second = runs(c, job)[1].split()
    assert second[1] == "1"  # PODIUM_RESTART_COUNT
    assert str(bad) not in second[-1].split(",")  # on healthy GPUs
    h = gpu_health(c, bad)
    assert h["label"] == "unschedulable-pending-reboot" and h["fenced"]
    assert h["fault"] == "xid-79" and h["reason"].startswith("health: Xid 79 on GPU")
    # The other job, on another GPU, kept running untouched.
    assert c.job(other)["state"] == "RUNNING" and runs(c, other) == [f"run 0 gpus {other_gpu}"]
    shown = c.job(job)
    assert shown["state"] == "RUNNING" and shown["restart_count"] == 1
    requeue = [e for e in shown["events"] if e["kind"] == "requeue"]
    assert requeue and requeue[0]["detail"].startswith("NODE_FAIL: health: Xid 79")
    # Nothing new lands on the fenced GPU, and without a reboot command it stays fenced.
    table = c.cli("nodes", check=True).stdout
    assert "unschedulable-pending-reboot" in table
    for j in (job, other):
        (c.work / f"gate-{j}").touch()
        assert c.wait(j)["state"] == "COMPLETED"


def test_a_job_requeued_after_a_fault_restarts_before_a_higher_priority_one(
    make: Callable[..., Cluster],
) -> None:
    """Expedited requeue: the job that failed goes first when it is requeued, so a
    job of higher priority that waited does not take the GPUs it held."""
    c = make()
    script = c.script(RECORD_RUN.format(work=c.work))
    job = c.submit("--gpus=2", "--auto-resume=2", str(script))
    until(lambda: runs(c, job), what="the job to start")
    bad = int(runs(c, job)[0].split()[-1].split(",")[0])
    urgent = c.submit("--gpus=3", "--nice=-1000", str(script))  # waits for 3 GPUs
    until(lambda: c.job(urgent)["reason"] == "Resources", what="the other job to wait")

    c.cli("inject", "xid", "--gpu", str(bad), "--code", "79", check=True)

    # 3 healthy GPUs are free for a moment: the failed job restarts on 2 of them.
    until(lambda: len(runs(c, job)) == 2, what="the job to restart")
    assert c.job(job)["state"] == "RUNNING" and c.job(job)["restart_count"] == 1
    assert c.job(urgent)["state"] == "PENDING" and not runs(c, urgent)
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"
    c.cli("cancel", str(urgent), check=True)


def test_reset_ladder_returns_the_gpu_and_leaves_an_admin_drain(
    make: Callable[..., Cluster], tmp_path: Path
) -> None:
    marker = tmp_path / "resets"
    c = make(f"  reset_command: sh -c 'echo {{gpu}} >> {marker}'\n")
    c.cli("drain", "node0", "--reason", "admin maintenance", check=True)
    c.cli("inject", "xid", "--gpu", "2", "--code", "48", check=True)
    until(lambda: gpu_health(c, 2)["last_deep_check"] == "passed", what="deep check to pass")
    h = gpu_health(c, 2)
    assert h["label"] == "schedulable" and not h["fenced"]
    assert marker.read_text().split() == ["2"]
    node = nodes(c)
    assert node["state"] == "drained" and node["reason"] == "admin maintenance"
    details = [e["detail"] for e in _node_events(c)]
    order = ["unschedulable-pending-reset", "reset", "deep check started", "deep check passed"]
    positions = [next(i for i, d in enumerate(details) if key in d) for key in order]
    assert positions == sorted(positions), details


def _node_events(c: Cluster) -> list[dict[str, Any]]:
    import sqlite3

    conn = sqlite3.connect(c.home / "podium.db")
    conn.row_factory = sqlite3.Row
    try:
        rows = conn.execute("SELECT * FROM events WHERE kind='health' ORDER BY id").fetchall()
        return [dict(r) for r in rows]
    finally:
        conn.close()


def test_repeat_offender_is_marked_for_replacement_until_an_admin_resumes_it(
    make: Callable[..., Cluster],
) -> None:
    c = make("  reset_command: 'true'\n  max_faults: 2\n")
    c.cli("inject", "xid", "--gpu", "1", "--code", "48", check=True)
    until(lambda: gpu_health(c, 1)["last_deep_check"] == "passed", what="first recovery")
    c.cli("inject", "xid", "--gpu", "1", "--code", "48", check=True)
    until(
        lambda: gpu_health(c, 1)["label"] == "unschedulable-pending-replacement",
        what="replacement",
    )
    assert "repeat offender" in gpu_health(c, 1)["reason"]
    time.sleep(1.0)  # the agent leaves it alone
    assert gpu_health(c, 1)["fenced"]
    job = c.submit("--gpus=4", "--wrap", "true")
    assert until(lambda: c.job(job)["reason"] == "ReqNodeNotAvail", what="ReqNodeNotAvail")
    out = c.cli("resume", "node0", "--gpu", "1")
    assert out.returncode == 0, out.stderr
    assert "node0 GPU 1: schedulable" in out.stdout
    assert c.wait(job)["state"] == "COMPLETED"


def test_recovery_none_only_labels(make: Callable[..., Cluster]) -> None:
    c = make(recovery="none")
    script = c.script(RECORD_RUN.format(work=c.work))
    job = c.submit("--gpus=1", "--auto-resume=1", str(script))
    c.wait(job, {"RUNNING"})
    until(lambda: runs(c, job), what="job start")
    gpu = int(runs(c, job)[0].split()[-1])
    c.cli("inject", "xid", "--gpu", str(gpu), "--code", "79", check=True)
    until(lambda: gpu_health(c, gpu)["fault"] == "xid-79", what="label")
    h = gpu_health(c, gpu)
    assert h["label"] == "unschedulable-pending-reboot" and not h["fenced"]
    assert c.job(job)["state"] == "RUNNING" and len(runs(c, job)) == 1
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"


def test_exit_codes_tell_faults_from_application_errors(make: Callable[..., Cluster]) -> None:
    c = make()
    script = c.script(
        f"echo run >> {c.work}/runs-$PODIUM_JOB_ID\n"
        'case "$PODIUM_RESTART_COUNT" in 0) exit 75;; *) exit 3;; esac\n'
    )
    job = c.submit("--auto-resume=5", "--requeue-exit=75", "--no-requeue-exit=3", str(script))
    done = c.wait(job)
    assert (done["state"], done["exit_code"], done["restart_count"]) == ("FAILED", 3, 1)
    assert "not requeued: exit code 3 means do not requeue" in done["reason"]
    app = c.submit("--auto-resume=5", "--wrap", "exit 1")
    done = c.wait(app)
    assert done["state"] == "FAILED" and done["restart_count"] == 0
    assert "application error (exit code 1)" in done["reason"]


def test_restarts_without_a_newer_checkpoint_stop(make: Callable[..., Cluster]) -> None:
    c = make()
    job = c.submit("--auto-resume=10", "--requeue-exit=75", "--wrap", "exit 75")
    done = c.wait(job)
    assert done["state"] == "FAILED" and done["restart_count"] == 3
    assert "no progress: 3 restarts without a newer checkpoint" in done["reason"]
    saving = c.submit(
        "--auto-resume=4",
        "--requeue-exit=75",
        "--wrap",
        'touch "$PODIUM_CHECKPOINT_DIR/step-$PODIUM_RESTART_COUNT"; sleep 0.05; exit 75',
    )
    done = c.wait(saving)
    assert done["restart_count"] == 4 and "auto-resume limit reached (4" in done["reason"]


def test_a_hung_rank_is_detected_by_its_missing_heartbeat(make: Callable[..., Cluster]) -> None:
    c = make()
    script = c.script(  # two ranks: one srun step of the job's two tasks
        "srun bash -c '"
        f'echo "run $PODIUM_RESTART_COUNT" >> {c.work}/runs-$PODIUM_JOB_ID\n'
        f"while [ ! -e {c.work}/gate-$PODIUM_JOB_ID ]; do\n"
        '  touch "$PODIUM_HEARTBEAT_FILE"; sleep 0.2\ndone\n\'\n'
    )
    job = c.submit("--auto-resume=1", "--heartbeat-timeout=2", "--ntasks=2", str(script))
    c.wait(job, {"RUNNING"})
    until(lambda: len(runs(c, job)) == 2, what="both ranks")
    out = c.cli("inject", "hang", str(job), "--rank", "1")
    assert out.returncode == 0, out.stderr
    # Rank 0 still touches the file: a per-job heartbeat sees the job alive. Stop rank 0
    # too: nothing touches it, and the job is declared hung.
    c.cli("inject", "hang", str(job), "--rank", "0", check=True)
    until(lambda: c.job(job)["restart_count"] == 1, what="hang detected and requeued")
    requeue = [e for e in c.job(job)["events"] if e["kind"] == "requeue"]
    assert "hang: no heartbeat for" in requeue[0]["detail"]
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"


def test_a_hung_rank_is_named_by_its_step_before_the_job_wide_heartbeat(
    make: Callable[..., Cluster],
) -> None:
    """Issue 48, item 4: each rank writes its step before its collective (here: it waits
    for the other rank to reach the same step, as an all-reduce would), so one rank
    stopped leaves the other waiting a step ahead: the supervisor names the rank and
    its step once both are quiet for half the heartbeat timeout."""
    c = make()
    script = c.script(  # two ranks, each: a step, its beat, then the "collective"
        "srun bash -c '"
        f'echo "run $PODIUM_RESTART_COUNT" >> {c.work}/runs-$PODIUM_JOB_ID\n'
        "i=0; other=$((1 - RANK))\n"
        f"while [ ! -e {c.work}/gate-$PODIUM_JOB_ID ]; do\n"
        '  i=$((i + 1)); echo $i > "$PODIUM_RANK_BEATS/$RANK"; touch "$PODIUM_HEARTBEAT_FILE"\n'
        '  until [ "$(cat "$PODIUM_RANK_BEATS/$other" 2>/dev/null || echo 0)" -ge $i ]; do\n'
        f"    [ -e {c.work}/gate-$PODIUM_JOB_ID ] && break; sleep 0.05\n"
        "  done\n"
        "  sleep 0.1\n"
        "done\n'\n"
    )
    job = c.submit("--auto-resume=1", "--heartbeat-timeout=8", "--ntasks=2", str(script))
    c.wait(job, {"RUNNING"})
    until(lambda: len(runs(c, job)) == 2, what="both ranks")
    c.cli("inject", "hang", str(job), "--rank", "1", check=True)
    stopped = time.monotonic()
    until(lambda: c.job(job)["restart_count"] == 1, what="hang detected and requeued")
    requeue = [e for e in c.job(job)["events"] if e["kind"] == "requeue"]
    assert re.search(r"hang: rank 1 stopped at step (\d+) while the others reached step",
                     requeue[0]["detail"]), requeue  # fmt: skip
    assert time.monotonic() - stopped < 8  # half the timeout quiet, not all of it
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"


def test_a_rank_stopped_inside_a_collective_is_named_by_its_stopped_process(
    make: Callable[..., Cluster],
) -> None:
    """Rank 1 hangs inside step 3's "collective", after its mark, so both ranks say
    step 3 and the marks cannot tell which hung. Its process running (the first
    run), only the job-wide timeout ends the run; stopped by a signal (the second
    run), the supervisor names it at half the timeout."""
    c = make()
    flags = f"{c.work}/through-$PODIUM_RESTART_COUNT"
    script = c.script(  # a step, its beat, both ranks in; then both through, as one
        "srun bash -c '"  # all-reduce's two halves; rank 1 never gets through step 3
        f'echo "run $PODIUM_RESTART_COUNT" >> {c.work}/runs-$PODIUM_JOB_ID\n'
        f"i=0; other=$((1 - RANK)); gate={c.work}/gate-$PODIUM_JOB_ID\n"
        '[ -e "$gate" ] && exit 0\n'
        'while [ ! -e "$gate" ]; do\n'
        '  i=$((i + 1)); echo $i > "$PODIUM_RANK_BEATS/$RANK"; touch "$PODIUM_HEARTBEAT_FILE"\n'
        '  until [ "$(cat "$PODIUM_RANK_BEATS/$other" 2>/dev/null || echo 0)" -ge $i ]; do\n'
        '    [ -e "$gate" ] && break; sleep 0.05\n'
        "  done\n"
        '  if [ $i -eq 3 ] && [ $RANK -eq 1 ]; then until [ -e "$gate" ]; do sleep 0.05; done; fi\n'
        f"  touch {flags}-$RANK-$i\n"
        f'  until [ -e {flags}-$other-$i ] || [ -e "$gate" ]; do sleep 0.05; done\n'
        "done\n'\n"
    )
    job = c.submit("--auto-resume=2", "--heartbeat-timeout=8", "--ntasks=2", str(script))
    until(lambda: len(runs(c, job)) == 2, what="both ranks")
    until(lambda: c.job(job)["restart_count"] == 1, 60, "the job-wide timeout's requeue")
    first = [e["detail"] for e in c.job(job)["events"] if e["kind"] == "requeue"]
    assert "hang: no heartbeat for" in first[0], first
    until(lambda: len(runs(c, job)) == 4, what="both ranks again")
    beats = c.home / "jobs" / str(job) / "ranks"
    until(lambda: sorted(p.read_text().strip() for p in beats.iterdir()) == ["3", "3"],
          what="both ranks at step 3")  # fmt: skip
    c.cli("inject", "hang", str(job), "--rank", "1", check=True)
    until(lambda: c.job(job)["restart_count"] == 2, 60, "the named hang's requeue")
    second = [e["detail"] for e in c.job(job)["events"] if e["kind"] == "requeue"][1]
    said = "hang: rank 1 stopped at step 3 (its process stopped by a signal) while the others"
    assert f"{said} reached step 3" in second, second
    (c.work / f"gate-{job}").touch()
    assert c.wait(job)["state"] == "COMPLETED"


def test_a_killed_rank_requeues_when_its_exit_code_is_listed(
    make: Callable[..., Cluster],
) -> None:
    c = make()
    script = c.script(RECORD_RUN.format(work=c.work))
    job = c.submit("--auto-resume=1", "--requeue-exit=137", str(script))
    c.wait(job, {"RUNNING"})
    until(lambda: runs(c, job), what="start")
    assert c.cli("inject", "kill", str(job)).returncode == 0
    until(lambda: len(runs(c, job)) == 2, what="restart")
    (c.work / f"gate-{job}").touch()
    done = c.wait(job)
    assert done["state"] == "COMPLETED" and done["restart_count"] == 1
    bad = c.cli("inject", "kill", str(job))
    assert bad.returncode == 2 and "only a running job" in bad.stderr


def test_a_full_disk_drains_the_node_until_it_has_room(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    c = health_cluster()
    text = (c.home / "cluster.yaml").read_text()
    text = text.replace(f"disk_paths: [{c.home}]", f"disk_paths: [{disk}]")
    text = text.replace("max_disk_used_percent: 100", "max_disk_used_percent: 83")
    # Each failed retest counts towards replacement: retest less often than the test
    # takes to free the disk (the deep checks of declared GPUs take no time).
    text = text.replace("retry_s: 1", "retry_s: 3")
    (c.home / "cluster.yaml").write_text(text)
    c.start()
    try:
        out = c.cli("inject", "disk-full", "--path", str(disk), "--percent", "95")
        assert out.returncode == 0, out.stderr
        until(lambda: nodes(c)["state"] == "drained", what="drain")
        node = nodes(c)
        assert node["reason"].startswith("health: ") and node["health"]["fenced"]
        job = c.submit("--wrap", "true")
        time.sleep(0.5)  # passes come and go (0.2 s apart): none starts it on a fenced node
        assert c.job(job)["state"] == "PENDING"
        c.cli("inject", "clear", "--path", str(disk), check=True)
        until(lambda: nodes(c)["state"] != "drained", what="return to service")
        assert c.wait(job)["state"] == "COMPLETED"
    finally:
        teardown_cluster(c)
        subprocess.run(["umount", str(disk)])
