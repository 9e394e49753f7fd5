"""Slurm's commands as clients use them (issue 27), through the shims `podium
slurm-commands install` writes, against a real daemon: a requeue asked from inside the
job finishes, a cancel shows at once, `scancel --signal` reaches what Slurm's reaches,
and `scontrol show config` answers."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import PODIUM, Cluster, make_cluster, teardown_cluster
from tests.polling import poll

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def slow_kill() -> Iterator[Cluster]:
    """A daemon whose KillWait (5 s) leaves a cancelled job COMPLETING long enough to see."""
    c = make_cluster(gpus=2, cpus=16, kill_wait=5.0)
    c.start()
    try:
        yield c
    finally:
        teardown_cluster(c)


def slurm(c: Cluster, *argv: str) -> subprocess.CompletedProcess[str]:
    """One of the shims, outside any job, as a user with them first on PATH runs it."""
    shims = c.home / "shims"
    if not shims.exists():
        subprocess.run([PODIUM, "slurm-commands", "install", str(shims)], check=True,
                       env=c.env, capture_output=True)  # fmt: skip
    return subprocess.run(
        [str(shims / argv[0]), *argv[1:]], env=c.env, capture_output=True, text=True, timeout=30
    )


def wait_for(path: Path, text: str, timeout: float = 30) -> str:
    read = lambda: path.read_text() if path.exists() else ""  # noqa: E731
    return poll(read, lambda seen: text in seen, f"{text!r} not in {path}", timeout)


def test_scontrol_requeue_from_inside_the_job_exits_0(slow_kill: Cluster) -> None:
    """Item 2: submitit's checkpoint handler runs `scontrol requeue $SLURM_JOB_ID` and
    fails the job if that does not exit 0; the requeue's SIGTERM reaches the job's
    processes, the command among them, but the command finishes first."""
    c = slow_kill
    log = c.work / "requeue.log"
    script = c.script(
        f"""
trap 'echo shell-got-term >> {log}' TERM
if [ "$SLURM_RESTART_COUNT" = 0 ]; then
  scontrol requeue "$SLURM_JOB_ID"; echo "scontrol=$?" >> {log}
  sleep 30
  exit 0
fi
echo "run $SLURM_RESTART_COUNT" >> {log}
""",
        "requeue.sh",
    )
    job = c.submit(str(script))
    assert c.wait(job)["state"] == "COMPLETED"
    text = log.read_text()
    assert "scontrol=0" in text and "run 1" in text, text
    assert c.job(job)["restart_count"] == 1


def test_a_cancel_shows_at_once_while_the_job_is_stopped(slow_kill: Cluster) -> None:
    """Item 3: a job that ignores SIGTERM is COMPLETING (squeue CG, scontrol
    JobState=COMPLETING) and CANCELLED to sacct from the moment scancel returns, and
    CANCELLED everywhere once KillWait's SIGKILL ended it."""
    c = slow_kill
    started = c.work / "stubborn.started"
    job = c.submit("--wrap", f"trap '' TERM; touch {started}; sleep 60")
    wait_for(started, "")
    assert slurm(c, "scancel", str(job)).returncode == 0
    squeue = slurm(c, "squeue", "-h", "-j", str(job), "-o", "%t %T")
    assert squeue.stdout.split() == ["CG", "COMPLETING"], squeue
    sacct = slurm(c, "sacct", "-XnP", f"-j{job}", "-o", "State")
    assert sacct.stdout.strip() == "CANCELLED", sacct
    assert "JobState=COMPLETING" in slurm(c, "scontrol", "show", "job", str(job)).stdout
    assert c.job(job)["state"] == "COMPLETING"
    ended = c.wait(job, timeout=30)
    assert ended["state"] == "CANCELLED" and ended["ending"] is None
    assert slurm(c, "squeue", "-h", "-j", str(job)).stdout == ""


def test_scancel_signal_reaches_steps_the_batch_shell_or_all(slow_kill: Cluster) -> None:
    """submitit's job._interrupt(): `scancel ID --signal USR2` reaches the srun steps,
    not the batch shell; `-b` the batch shell alone; `-f` both (the same as a real
    Slurm 22.05 did with this script)."""
    c = slow_kill
    log = c.work / "signals.log"
    script = c.script(
        f"""
trap 'echo batch-usr1 >> {log}' USR1
srun bash -c 'trap "echo step-usr1 >> {log}" USR1; echo step-ready >> {log}
  while :; do sleep 0.1; done' &
while :; do sleep 0.1; done
""",
        "signals.sh",
    )
    job = c.submit(str(script))
    wait_for(log, "step-ready")
    assert slurm(c, "scancel", str(job), "--signal", "USR1").returncode == 0
    wait_for(log, "step-usr1")
    time.sleep(0.5)  # the batch shell would have logged it by now, had it been signalled
    assert "batch-usr1" not in log.read_text()
    assert slurm(c, "scancel", "-b", "--signal=SIGUSR1", str(job)).returncode == 0
    wait_for(log, "batch-usr1")
    assert log.read_text().count("step-usr1") == 1
    assert slurm(c, "scancel", "-f", "-s", "10", str(job)).returncode == 0
    text = poll(log.read_text,
                lambda seen: seen.count("step-usr1") >= 2 and seen.count("batch-usr1") >= 2,
                "USR1 twice in the step and in the batch shell", 10)  # fmt: skip
    # -f: every process, srun among them, which forwards it to its step too: the step
    # may see it twice (two close signals can also merge into one trap run)
    assert text.count("step-usr1") >= 2 and text.count("batch-usr1") == 2, text
    bad = slurm(c, "scancel", "--signal=USR9", str(job))
    assert bad.returncode == 1 and "invalid signal 'USR9'" in bad.stderr
    assert slurm(c, "scancel", str(job)).returncode == 0
    pending = c.submit("--hold", "--wrap", "true")
    refused = slurm(c, "scancel", "--signal=USR1", str(pending))
    assert refused.returncode == 1 and "only a running job gets a signal" in refused.stderr
    assert slurm(c, "scancel", str(pending)).returncode == 0


def test_scontrol_show_config_answers_what_snakemake_reads(slow_kill: Cluster) -> None:
    out = slurm(slow_kill, "scontrol", "show", "config").stdout.splitlines()
    assert out[0].startswith("Configuration data as of ")
    values = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out[1:])}
    assert values["MinJobAge"] == "300 sec" and values["KillWait"] == "5 sec"
    assert values["ClusterName"] == "podium"
