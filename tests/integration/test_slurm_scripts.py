"""Batch scripts written for Slurm, run unchanged on the embedded cluster: each checks
what it prints, not only how it ends."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster

pytestmark = pytest.mark.integration
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_a_strict_script_finds_sbatchs_variables(cluster: Cluster) -> None:
    script = cluster.script(
        """
set -euo pipefail
echo "job=$SLURM_JOB_ID/$SLURM_JOBID name=$SLURM_JOB_NAME"
echo "nodes=$SLURM_JOB_NODELIST/$SLURM_JOB_NUM_NODES tasks=$SLURM_NTASKS"
echo "cpus=$SLURM_CPUS_ON_NODE per-task=$SLURM_CPUS_PER_TASK gpus=$SLURM_JOB_GPUS"
echo "where=$SLURM_SUBMIT_DIR part=$SLURM_JOB_PARTITION qos=$SLURM_JOB_QOS"
echo "restarts=$SLURM_RESTART_COUNT rank=$SLURM_PROCID start=$SLURM_JOB_START_TIME"
""",
        "strict.sh",
    )
    job = cluster.submit(
        "-J", "strict", "-c", "2", "--gpus=1", "-t", "5", "-o", "%j.out", str(script)
    )
    assert cluster.wait(job)["state"] == "COMPLETED"
    out = (cluster.work / f"{job}.out").read_text().splitlines()
    assert out[0] == f"job={job}/{job} name=strict"
    assert out[1] == "nodes=node0/1 tasks=1"
    assert out[2].startswith("cpus=2 per-task=2 gpus=") and out[2][-1].isdigit()
    assert out[3] == f"where={cluster.work} part=main qos=normal"
    assert out[4].startswith("restarts=0 rank=0 start=1")


def test_a_throttled_array_sweep_reads_its_task_id(cluster: Cluster) -> None:
    script = cluster.script(
        """
set -u
range="$SLURM_ARRAY_TASK_MIN-$SLURM_ARRAY_TASK_MAX:$SLURM_ARRAY_TASK_STEP"
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT ($range) in $SLURM_ARRAY_JOB_ID"
""",
        "sweep.sh",
    )
    first = cluster.submit("--array=0-6:2%2", "-o", "sweep-%A_%a.out", str(script))
    tasks = cluster.wait_array(first, 4)
    assert sorted(tasks) == [0, 2, 4, 6]
    seen = []
    for index, job in sorted(tasks.items()):
        assert job["state"] == "COMPLETED"
        seen.append((cluster.work / f"sweep-{first}_{index}.out").read_text().strip())
    assert seen == [f"task {i} of 4 (0-6:2) in {first}" for i in (0, 2, 4, 6)]


def test_a_job_submitted_from_a_job_gets_its_own_variables(cluster: Cluster) -> None:
    inherited = dict(cluster.env, SLURM_JOB_ID="999", SLURM_STEP_ID="5", SLURM_CONF="/x.conf")
    script = cluster.script('echo "id=$SLURM_JOB_ID step=${SLURM_STEP_ID-none} conf=$SLURM_CONF"\n')
    result = cluster.cli("submit", "--parsable", "-o", "inner-%j.out", str(script), env=inherited)
    assert result.returncode == 0, result.stderr
    job = int(result.stdout.strip())
    assert cluster.wait(job)["state"] == "COMPLETED"
    assert (cluster.work / f"inner-{job}.out").read_text() == f"id={job} step=none conf=/x.conf\n"


def test_submitits_directives_and_other_harmless_ones_are_accepted(cluster: Cluster) -> None:
    # The #SBATCH block submitit's Slurm executor writes, plus --mem=0, binding hints
    # and --mail-type on a cluster without a mail command (accepted with a warning).
    script = cluster.script(
        """
#SBATCH --cpus-per-task=1
#SBATCH --error=%j_0_log.err
#SBATCH --job-name=submitit
#SBATCH --mem=0
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output=%j_0_log.out
#SBATCH --signal=USR2@90
#SBATCH --time=5
#SBATCH --wckey=submitit
#SBATCH --cpu-bind=cores --hint=nomultithread --mail-type=END,FAIL
export SUBMITIT_EXECUTOR=slurm
echo "mem=$SLURM_MEM_PER_NODE tasks=$SLURM_NTASKS_PER_NODE"
srun --unbuffered --output %j_%t_log.out --error %j_%t_log.err \
  sh -c 'echo "task $SLURM_PROCID of $SLURM_NTASKS in step $SLURM_STEP_ID"'
""",
        "submitit.sh",
    )
    result = cluster.cli("submit", "--parsable", str(script))
    assert result.returncode == 0, result.stderr
    warning = result.stderr.strip()
    assert "\n" not in warning and warning.startswith("podium: warning: line 13 (#SBATCH")
    assert "--mail-type: this cluster has no mail transport" in warning
    job = int(result.stdout.strip())
    assert cluster.wait(job)["state"] == "COMPLETED"
    # --mem=0 sets no SLURM_MEM_PER_NODE, as on Slurm 22.05 (seen on the test cluster).
    # The batch script and then its srun step (task 0) append to the same file.
    assert (cluster.work / f"{job}_0_log.out").read_text() == (
        "mem= tasks=1\ntask 0 of 1 in step 0\n"
    )
    assert cluster.job(job)["mem_mb"] == 16000  # all of the node's
    acct = json.loads(cluster.cli("acct", "--json", check=True).stdout)
    assert [j["wckey"] for j in acct if j["job_id"] == job] == ["submitit"]
    events = cluster.job(job)["events"]
    mail = [e["detail"] for e in events if e["kind"] == "mail"]
    assert len(mail) == 1 and mail[0].startswith("END to ") and "not sent" in mail[0], events


def test_torchrun_finds_its_head_node_through_scontrol(cluster: Cluster) -> None:
    script = cluster.script(
        """
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
echo "head=$head nodes=$(scontrol show hostnames node[1-3] | tr '\\n' ' ')"
scontrol show job "$SLURM_JOB_ID" | grep -o 'JobState=[A-Z]*'
squeue -h -j "$SLURM_JOB_ID" -o "%i %t %j"
command -v scontrol
""",
        "torchrun.sh",
    )
    job = cluster.submit("-o", "%j.out", str(script))
    assert cluster.wait(job)["state"] == "COMPLETED"
    out = (cluster.work / f"{job}.out").read_text().splitlines()
    assert out[:3] == [
        "head=node0 nodes=node1 node2 node3 ",
        "JobState=RUNNING",
        f"{job} R torchrun.sh",
    ]
    assert out[3].endswith("/podium/slurm_commands/bin/scontrol")  # Podium's, first on the PATH


def test_a_megatron_style_usr1_trap_requeues_the_job(cluster: Cluster) -> None:
    # Megatron/NeMo: a USR1 before the time limit; the trap requeues the job, which
    # comes back with the same id and SLURM_RESTART_COUNT raised.
    script = cluster.script(
        """
#SBATCH -t 1 --signal=B:USR1@58 --open-mode=append
if [ "$SLURM_RESTART_COUNT" -gt 0 ]; then
    echo "resumed: restart $SLURM_RESTART_COUNT of job $SLURM_JOB_ID"
    exit 0
fi
trap 'echo "USR1: requeue"; scontrol requeue "$SLURM_JOB_ID"' USR1
echo "first run of job $SLURM_JOB_ID"
sleep 50 &
wait
sleep 50
""",
        "megatron.sh",
    )
    job = cluster.submit("-o", "%j.out", str(script))
    done = cluster.wait(job, timeout=90)
    assert (done["state"], done["restart_count"]) == ("COMPLETED", 1), done
    assert (cluster.work / f"{job}.out").read_text().splitlines() == [
        f"first run of job {job}",
        "USR1: requeue",
        f"resumed: restart 1 of job {job}",
    ]


def test_a_job_submits_dependent_jobs_with_sbatch(cluster: Cluster) -> None:
    script = cluster.script(
        """
set -euo pipefail
first=$(sbatch --parsable -o first-%j.out --wrap 'echo first')
then=$(sbatch --parsable -d "afterok:$first" -o then-%j.out --wrap 'echo then')
echo "$first $then"
""",
        "pipeline.sh",
    )
    job = cluster.submit("-o", "%j.out", str(script))
    assert cluster.wait(job)["state"] == "COMPLETED"
    first, then = map(int, (cluster.work / f"{job}.out").read_text().split())
    assert cluster.wait(then)["state"] == "COMPLETED"
    assert (cluster.work / f"first-{first}.out").read_text() == "first\n"
    assert (cluster.work / f"then-{then}.out").read_text() == "then\n"


NCCL_TEST = """\
#!/bin/bash
#SBATCH --job-name=nccl-test
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-node=2
#SBATCH --output=%x_%j.out
#SBATCH --error=%x_%j.err
#SBATCH --exclusive
#SBATCH --wait-all-nodes=1

srun --mpi=pmix {python} {examples}/all_reduce_perf.py -b 8 -e 64K -f 8 -g 1
"""


def check_nccl_test_output(out: str) -> None:
    """The table nccl-tests prints: one row per size, results all right."""
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [int(r[0]) for r in rows] == [8, 64, 512, 4096, 32768], out
    assert all(r[2:5] == ["float", "sum", "-1"] for r in rows), out
    assert all(r[8] == "0" and r[12] == "0" for r in rows), out  # no wrong element
    assert "# Out of bounds values : 0 OK" in out
    assert "# Avg bus bandwidth" in out


def test_the_seeds_nccl_test_reduced_to_one_node(cluster: Cluster) -> None:
    script = cluster.work / "nccl-test.sbatch"
    script.write_text(NCCL_TEST.format(python=sys.executable, examples=EXAMPLES))
    job = cluster.submit(str(script))
    done = cluster.wait(job, timeout=120)
    err = (cluster.work / f"nccl-test_{job}.err").read_text()
    assert done["state"] == "COMPLETED", err
    check_nccl_test_output((cluster.work / f"nccl-test_{job}.out").read_text())
    steps = {s["step_id"]: s for s in _acct_steps(cluster, job)}
    assert steps["0"]["ntasks"] == 2 and steps["0"]["state"] == "COMPLETED"
    assert steps["batch"]["ntasks"] == 1


def _acct_steps(cluster: Cluster, job: int) -> list[dict[str, object]]:
    acct = json.loads(cluster.cli("acct", "--json", check=True).stdout)
    steps: list[dict[str, object]] = next(j["steps"] for j in acct if j["job_id"] == job)
    return steps


TORCHRUN = """\
#!/bin/bash
#SBATCH -N 1 --ntasks-per-node=1 -c 2 -o %j.out
set -euo pipefail
head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
srun {torchrun} --nnodes="$SLURM_NNODES" --nproc-per-node=2 --rdzv-id="$SLURM_JOB_ID" \\
  --rdzv-backend=c10d --rdzv-endpoint="$head:$MASTER_PORT" {worker}
"""
WORKER = """\
import os
import sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
# one write per line: under PYTHONUNBUFFERED, print() writes the text and its newline
# apart, and the two ranks' lines could interleave in the shared output file
sys.stdout.write(f"rank {dist.get_rank()}/{dist.get_world_size()} "
                 f"local {os.environ['LOCAL_RANK']} sum {int(total.item())}\\n")
sys.stdout.flush()
dist.destroy_process_group()
"""


def test_torchrun_runs_its_workers_from_the_head_node_scontrol_names() -> None:
    c = make_cluster()
    config = c.home / "cluster.yaml"  # the node named as the host is, so its name resolves
    config.write_text(config.read_text().replace("name: node0", f"name: {socket.gethostname()}"))
    c.start()
    try:
        (c.work / "worker.py").write_text(WORKER)
        script = c.work / "torchrun.sh"
        torchrun = Path(sys.executable).with_name("torchrun")
        script.write_text(TORCHRUN.format(torchrun=torchrun, worker=c.work / "worker.py"))
        job = c.submit(str(script))
        done = c.wait(job, timeout=120)
        out = (c.work / f"{job}.out").read_text()
        assert done["state"] == "COMPLETED", out
        ranks = sorted(line for line in out.splitlines() if line.startswith("rank "))
        assert ranks == ["rank 0/2 local 0 sum 3", "rank 1/2 local 1 sum 3"], out
    finally:
        teardown_cluster(c)
