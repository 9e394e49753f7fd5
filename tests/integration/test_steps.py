"""Slurm's job/step model on the embedded cluster: the batch script runs once, and
each `srun` inside it is a job step of real processes, recorded as sacct records it."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Cluster
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def steps_of(c: Cluster, job_id: int) -> dict[str, dict[str, object]]:
    out = c.cli("acct", "--json", check=True)
    job = next(j for j in json.loads(out.stdout) if j["job_id"] == job_id)
    return {s["step_id"]: s for s in job["steps"]}


def test_the_batch_script_runs_once_and_srun_starts_the_tasks(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        """
#SBATCH -n 4 --gpus-per-task=1 -o once-%j.out
echo "batch ntasks=$SLURM_NTASKS procid=$SLURM_PROCID step=${SLURM_STEP_ID:-none}"
srun --label sh -c 'echo "rank $SLURM_PROCID/$SLURM_NTASKS local $SLURM_LOCALID step \
$SLURM_STEP_ID gpus $CUDA_VISIBLE_DEVICES world $WORLD_SIZE"' | sort
""",
        "once.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id)
    assert job["state"] == "COMPLETED", job
    lines = (c.work / f"once-{job_id}.out").read_text().splitlines()
    assert lines[0] == "batch ntasks=4 procid=0 step=none"
    gpus = job["gpu_ids"]
    assert lines[1:] == [
        f"{r}: rank {r}/4 local {r} step 0 gpus {gpus[r]} world 4" for r in range(4)
    ]


def test_step_subsets_output_patterns_and_exit_codes(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        """
#SBATCH -n 4 -c 2 -o codes-%j.out
srun -n 2 -c 1 -o step-%j-%s-%t.out sh -c 'echo "task $SLURM_PROCID of $SLURM_STEP_NUM_TASKS"'
srun -n 3 -c 1 sh -c 'exit $((SLURM_PROCID + 2))'; echo "exit=$?"
srun -n 1 sh -c 'kill -TERM $$'; echo "signalled=$?"
srun -n 9 true; echo "too-many=$?"
srun --bogus true; echo "bogus=$?"
""",
        "codes.sh",
    )
    job_id = c.submit(str(script))
    assert c.wait(job_id)["state"] == "COMPLETED"
    for t in (0, 1):
        assert (c.work / f"step-{job_id}-0-{t}.out").read_text() == f"task {t} of 2\n"
    out = (c.work / f"codes-{job_id}.out").read_text()
    for rank, code in ((0, 2), (1, 3), (2, 4)):
        assert f"srun: error: node0: task {rank}: Exited with exit code {code}\n" in out
    assert "exit=4\n" in out
    assert "srun: error: node0: task 0: Terminated\n" in out and "signalled=143\n" in out
    assert "More processors requested than permitted" in out and "too-many=1\n" in out
    assert "srun: error: unrecognized option '--bogus'" in out and "bogus=1\n" in out
    steps = steps_of(c, job_id)
    assert list(steps) == ["batch", "0", "1", "2"]  # refused steps are never created
    assert steps["batch"]["state"] == "COMPLETED" and steps["batch"]["exit_code"] == 0
    assert (steps["0"]["state"], steps["0"]["ntasks"], steps["0"]["exit_code"]) == (
        "COMPLETED",
        2,
        0,
    )
    assert (steps["1"]["state"], steps["1"]["exit_code"]) == ("FAILED", 4)
    assert (steps["2"]["state"], steps["2"]["signal"]) == ("FAILED", 15)
    acct = c.cli("acct", check=True).stdout
    assert f"{job_id}.batch" in acct and f"{job_id}.1" in acct


def test_kill_on_bad_exit_and_wait_stop_the_other_tasks(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        """
#SBATCH -n 2 -o kill-%j.out
start=$(date +%s)
srun --kill-on-bad-exit sh -c '[ $SLURM_PROCID = 1 ] && exit 7; sleep 30'; echo "kobe=$?"
srun --wait=1 sh -c '[ $SLURM_PROCID = 1 ] && exit 0; sleep 30'; echo "wait=$?"
echo "took=$(( $(date +%s) - start ))"
""",
        "kill.sh",
    )
    job_id = c.submit(str(script))
    assert c.wait(job_id, timeout=60)["state"] == "COMPLETED"
    out = (c.work / f"kill-{job_id}.out").read_text()
    assert "kobe=7\n" in out and "wait=143\n" in out, out
    took = int(out.split("took=")[1].split()[0])
    assert took < 20, out  # neither step waited for its 30 s sleeper


def test_signal_without_b_reaches_steps_and_not_the_batch_shell(cluster: Cluster) -> None:
    c = cluster
    script = c.script(
        """
#SBATCH -n 1 -t 1 --signal=USR1@55 -o sig-%j.out
trap 'echo "batch got USR1"' USR1
srun sh -c 'trap "echo step got USR1; exit 0" USR1; while :; do sleep 0.1; done'
echo "step ended $?"
""",
        "sig.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id, timeout=30)
    assert job["state"] == "COMPLETED", job
    out = (c.work / f"sig-{job_id}.out").read_text()
    # every process of the step gets it (its sleep too), the batch shell does not
    assert "step got USR1\n" in out and out.endswith("step ended 0\n"), out
    assert "batch got USR1" not in out


def test_cancel_reaches_running_steps_and_records_them(cluster: Cluster) -> None:
    c = cluster
    script = c.script(
        f"""
#SBATCH -n 2 -o cancel-%j.out
srun sh -c 'echo $$ > {c.work}/pid-$SLURM_PROCID; exec sleep 60'
""",
        "cancel.sh",
    )
    job_id = c.submit(str(script))
    files = [c.work / f"pid-{r}" for r in (0, 1)]
    # each file is made, then written: wait until both hold their pid
    wait_until(lambda: all(f.exists() and f.read_text().endswith("\n") for f in files),
               "the step's tasks to start", 20)  # fmt: skip
    pids = [int(f.read_text()) for f in files]
    c.cli("cancel", str(job_id), check=True)
    assert c.wait(job_id)["state"] == "CANCELLED"
    for pid in pids:
        assert not _alive(pid)
    steps = steps_of(c, job_id)
    assert steps["batch"]["state"] == "CANCELLED"
    assert steps["0"]["state"] == "CANCELLED" and steps["0"]["ntasks"] == 2


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_running_jobs_steps_show_while_it_runs(cluster: Cluster) -> None:
    c = cluster
    script = c.script(
        f"""
#SBATCH -n 2 -o live-%j.out
srun -n 1 true
srun -n 2 sh -c 'touch {c.work}/live-$SLURM_PROCID; sleep 30'
""",
        "live.sh",
    )
    job_id = c.submit(str(script))
    wait_until((c.work / "live-1").exists, "step 1 to be live", 20)
    steps = steps_of(c, job_id)
    assert [(k, s["state"], s["ntasks"]) for k, s in steps.items()] == [
        ("batch", "RUNNING", 1),
        ("0", "COMPLETED", 1),
        ("1", "RUNNING", 2),
    ]
    assert steps["1"]["end_time"] is None and steps["1"]["elapsed_s"] > 0
    c.cli("cancel", str(job_id), check=True)
    assert c.wait(job_id)["state"] == "CANCELLED"
