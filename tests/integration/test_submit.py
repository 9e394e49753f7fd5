"""Submitting: #SBATCH directives honoured, command-line overrides, environment, output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration


def test_directives_and_task_environment(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        """
#SBATCH --job-name=envcheck
#SBATCH --ntasks=2
#SBATCH --gpus=2
#SBATCH --cpus-per-task=2
#SBATCH --mem=1G
#SBATCH --time=5
#SBATCH --output=env-%x-%j.out
srun --output=env-%x-%j-%t.out sh -c 'echo "JOB=$PODIUM_JOB_ID NAME=$PODIUM_JOB_NAME \
NTASKS=$PODIUM_NTASKS PROCID=$PODIUM_PROCID LOCALID=$PODIUM_LOCALID SUBMIT=$PODIUM_SUBMIT_DIR \
MASTER=$MASTER_ADDR:$MASTER_PORT WORLD=$WORLD_SIZE RANK=$RANK LOCAL_RANK=$LOCAL_RANK \
CUDA=$CUDA_VISIBLE_DEVICES"'
""",
        "env.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id)
    assert job["state"] == "COMPLETED", job
    assert job["name"] == "envcheck"
    assert job["cpus"] == 4 and job["mem_mb"] == 1024 and job["gpus"] == 2
    assert job["time_limit_s"] == 300
    lines = {}
    for rank in (0, 1):
        text = (c.work / f"env-envcheck-{job_id}-{rank}.out").read_text()
        fields = dict(item.split("=", 1) for item in text.split())
        lines[rank] = fields
        assert fields["JOB"] == str(job_id)
        assert fields["NAME"] == "envcheck"
        assert fields["NTASKS"] == "2" and fields["WORLD"] == "2"
        assert fields["PROCID"] == fields["RANK"] == str(rank)
        assert fields["LOCALID"] == fields["LOCAL_RANK"] == str(rank)
        assert fields["SUBMIT"] == str(c.work)
        assert fields["CUDA"] == ",".join(map(str, job["gpu_ids"]))
    assert lines[0]["MASTER"] == lines[1]["MASTER"]
    assert lines[0]["MASTER"].startswith("127.0.0.1:")


def test_command_line_overrides_script(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script("#SBATCH --job-name=fromscript --gpus=1\necho hi\n", "ovr.sh")
    job_id = c.submit("--job-name=fromcli", "-G", "3", "--qos=high", str(script))
    job = c.job(job_id)
    assert job["name"] == "fromcli" and job["gpus"] == 3 and job["qos"] == "high"


def test_gpus_per_task_binds_each_task_to_its_own_gpu(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        "#SBATCH -n 2 --gpus-per-task=1\n"
        "srun -o pertask-%j-%t.out sh -c 'echo $CUDA_VISIBLE_DEVICES'\n",
        "pertask.sh",
    )
    job_id = c.submit(str(script))
    job = c.wait(job_id)
    seen = [(c.work / f"pertask-{job_id}-{t}.out").read_text().strip() for t in (0, 1)]
    assert job["gpus"] == 2
    assert sorted(seen) == sorted(str(g) for g in job["gpu_ids"])
    assert seen[0] != seen[1]


def test_gres_with_type_and_unknown_type(shared_cluster: Cluster) -> None:
    c = shared_cluster
    ok = c.cli("submit", "--parsable", "--gres=gpu:h100:2", "--wrap", "true")
    assert ok.returncode == 0, ok.stderr
    bad = c.cli("submit", "--gres=gpu:a100:1", "--wrap", "true")
    assert bad.returncode == 2
    assert "GPU type 'a100'" in bad.stderr and "h100" in bad.stderr


def test_wrap_output_pattern_and_exit_code(shared_cluster: Cluster) -> None:
    c = shared_cluster
    job_id = c.submit("-J", "wrapped", "-o", "w-%x-%u-%j.log", "--wrap", "echo out; exit 3")
    job = c.wait(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 3 and job["signal"] is None
    user = job["user"]
    assert (c.work / f"w-wrapped-{user}-{job_id}.log").read_text() == "out\n"


def test_default_output_file_and_separate_error(shared_cluster: Cluster) -> None:
    c = shared_cluster
    job_id = c.submit("--wrap", "echo to-out; echo to-err >&2")
    c.wait(job_id)
    assert (c.work / f"slurm-{job_id}.out").read_text() == "to-out\nto-err\n"
    job_id = c.submit("-e", "err-%j.txt", "--wrap", "echo to-out; echo to-err >&2")
    c.wait(job_id)
    assert (c.work / f"slurm-{job_id}.out").read_text() == "to-out\n"
    assert (c.work / f"err-{job_id}.txt").read_text() == "to-err\n"


def test_open_mode_append(shared_cluster: Cluster) -> None:
    c = shared_cluster
    for word in ("one", "two"):
        c.wait(c.submit("--open-mode=append", "-o", "append.log", "--wrap", f"echo {word}"))
    assert (c.work / "append.log").read_text() == "one\ntwo\n"


def test_chdir_and_script_arguments(shared_cluster: Cluster, tmp_path: Path) -> None:
    c = shared_cluster
    sub = c.work / "sub"
    sub.mkdir(exist_ok=True)
    script = c.script('#SBATCH --chdir=sub\necho "$PWD $1 $2" > args.txt\n', "args.sh")
    c.wait(c.submit(str(script), "first", "second arg"))
    assert (sub / "args.txt").read_text() == f"{sub} first second arg\n"


def test_export_none_and_named_variables(shared_cluster: Cluster) -> None:
    c = shared_cluster
    env = dict(c.env, PODIUM_TEST_SECRET="s3cret", KEEP_ME="kept")
    body = 'echo "secret=${PODIUM_TEST_SECRET:-unset} keep=${KEEP_ME:-unset} x=${X:-unset}"'
    (c.work / "exp.sh").write_text(f"#!/bin/bash\n{body}\n")
    for export, expected in (
        (None, "secret=s3cret keep=kept x=unset"),
        ("--export=NONE", "secret=unset keep=unset x=unset"),
        ("--export=KEEP_ME,X=1", "secret=unset keep=kept x=1"),
        ("--export=ALL,X=2", "secret=s3cret keep=kept x=2"),
    ):
        args = ["submit", "--parsable", "-o", "exp-%j.out"]
        args += [export] if export else []
        result = c.cli(*args, "exp.sh", env=env)
        assert result.returncode == 0, result.stderr
        job_id = int(result.stdout)
        c.wait(job_id)
        assert (c.work / f"exp-{job_id}.out").read_text().strip() == expected, export


def test_job_yaml_file(shared_cluster: Cluster) -> None:
    c = shared_cluster
    (c.work / "job.yaml").write_text(
        "job_name: fromyaml\ngpus: 1\nntasks: 1\ntime: '00:02:00'\n"
        "output: yaml-%j.out\ncommand: echo yaml-ran $CUDA_VISIBLE_DEVICES\n"
    )
    job_id = c.submit("-f", "job.yaml")
    job = c.wait(job_id)
    assert job["name"] == "fromyaml" and job["time_limit_s"] == 120
    assert (c.work / f"yaml-{job_id}.out").read_text().startswith("yaml-ran ")


def test_script_from_stdin(shared_cluster: Cluster) -> None:
    c = shared_cluster
    result = c.cli("submit", "--parsable", stdin="#!/bin/sh\n#SBATCH -J stdin-job\necho in\n")
    assert result.returncode == 0, result.stderr
    assert c.job(int(result.stdout))["name"] == "stdin-job"


def test_json_output_has_stable_keys(shared_cluster: Cluster) -> None:
    c = shared_cluster
    result = c.cli("submit", "--json", "--hold", "--wrap", "true", check=True)
    record = json.loads(result.stdout)
    for key in (
        "job_id",
        "name",
        "user",
        "state",
        "reason",
        "partition",
        "qos",
        "gpus",
        "node",
        "exit_code",
        "submit_time",
        "start_time",
        "end_time",
        "elapsed_s",
        "gpu_seconds",
        "restart_count",
    ):
        assert key in record
    assert record["state"] == "PENDING" and record["reason"] == "JobHeldUser"
    c.cli("cancel", str(record["job_id"]), check=True)


def test_array_job_with_throttle(shared_cluster: Cluster) -> None:
    c = shared_cluster
    script = c.script(
        "#SBATCH --array=0-5%2 -o arr-%A_%a.out\n"
        'echo "$PODIUM_ARRAY_JOB_ID $PODIUM_ARRAY_TASK_ID"\nsleep 0.5\n',
        "array.sh",
    )
    array_id = c.submit("--hold", str(script))  # one record until a task starts (O(1))
    (pending,) = [
        j
        for j in json.loads(c.cli("queue", "--json", check=True).stdout)
        if j["array_job_id"] == array_id
    ]
    assert pending["display_id"] == f"{array_id}_[0-5%2]" and pending["array_task_id"] is None
    one_each = json.loads(c.cli("queue", "--array", "--json", check=True).stdout)
    listed = [j["display_id"] for j in one_each if j["array_job_id"] == array_id]
    assert listed == [f"{array_id}_{i}" for i in range(6)]  # squeue -r
    assert f"{array_id}_[0-5%2]" in c.cli("queue", check=True).stdout
    c.cli("release", str(array_id), check=True)
    tasks = list(c.wait_array(array_id, 6).values())
    assert sorted(j["array_task_id"] for j in tasks) == list(range(6))
    assert {j["state"] for j in tasks} == {"COMPLETED"}
    acct = [
        j
        for j in json.loads(c.cli("acct", "--json", check=True).stdout)
        if j["array_job_id"] == array_id
    ]
    # Never more than two at once: sort by start and check overlaps.
    spans = sorted((j["start_time"], j["end_time"]) for j in acct)
    for i, (start, _) in enumerate(spans):
        overlapping = [s for s in spans[:i] if s[1] > start]
        assert len(overlapping) <= 1, spans
    for task in tasks:
        text = (c.work / f"arr-{array_id}_{task['array_task_id']}.out").read_text().split()
        assert text == [str(array_id), str(task["array_task_id"])]


def test_test_only_queues_nothing(shared_cluster: Cluster) -> None:
    c = shared_cluster
    before = len(json.loads(c.cli("queue", "--all", "--json", check=True).stdout))
    result = c.cli("submit", "--test-only", "--gpus=2", "--wrap", "true", check=True)
    assert "would be queued" in result.stdout
    after = len(json.loads(c.cli("queue", "--all", "--json", check=True).stdout))
    assert before == after


def test_dry_run_prints_the_launch_plan_on_every_backend(
    shared_cluster: Cluster, tmp_path: Path
) -> None:
    c = shared_cluster
    before = len(json.loads(c.cli("queue", "--all", "--json", check=True).stdout))
    env = dict(c.env, SECRET_TOKEN="hunter2")
    result = c.cli("submit", "--dry-run", "--gpus=1", "-J", "plan", "--wrap", "true", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    plan = data["launch_plan"]
    assert data["backend"] == "embedded" and data["job"]["name"] == "plan"
    assert plan["gpu_ids"] == [0] and plan["argv"][0] == "SCRIPT"
    assert "SECRET_TOKEN" in plan["environment"] and "hunter2" not in result.stdout
    after = len(json.loads(c.cli("queue", "--all", "--json", check=True).stdout))
    assert before == after
    # An invalid request is refused the same way as a submission.
    bad = c.cli("submit", "--dry-run", "--gpus=99", "--wrap", "true")
    assert bad.returncode != 0 and bad.stderr.count("\n") == 1
    # On backend: slurm it is the sbatch script, with no cluster needed to print it.
    config = tmp_path / "slurm.yaml"
    config.write_text("backend: slurm\ncluster_name: lab\n")
    slurm = c.cli(
        "submit", "--dry-run", "-N", "2", "--wrap", "true",
        env=dict(c.env, PODIUM_CONFIG=str(config)),
    )  # fmt: skip
    assert slurm.returncode == 0, slurm.stderr
    assert slurm.stdout.startswith("#!") and "--nodes=2" in slurm.stdout


def test_wait_returns_the_job_exit_code(shared_cluster: Cluster) -> None:
    result = shared_cluster.cli("submit", "--wait", "--quiet", "--wrap", "exit 7")
    assert result.returncode == 7


def test_a_batch_file_is_submitted_all_or_none(shared_cluster: Cluster) -> None:
    """`podium submit --batch FILE`: one job per line, in one commit (POST /v1/jobs/batch);
    a bad line refuses the whole batch, naming the job; a retried batch is not doubled."""
    c = shared_cluster
    marker = c.work / "batch-out"
    marker.mkdir(exist_ok=True)
    good = c.work / "jobs.txt"
    good.write_text(
        f'--wrap "echo one > {marker}/one"\n'
        "# a comment, then a blank line\n\n"
        f"-J second --wrap 'echo two > {marker}/two'\n"
        f'--array=0-2 --wrap "echo $SLURM_ARRAY_TASK_ID > {marker}/task"\n'
    )
    result = c.cli("submit", "--parsable", "--batch", str(good), check=True)
    firsts = [int(line) for line in result.stdout.split()]
    assert len(firsts) == 3 and firsts == sorted(firsts)
    for job_id in (firsts[0], firsts[1], firsts[2], firsts[2] + 2):
        assert c.wait(job_id)["state"] == "COMPLETED"
    assert c.job(firsts[1])["name"] == "second"
    assert (marker / "one").read_text() == "one\n" and (marker / "two").read_text() == "two\n"

    with c.api() as api:
        before = len(api.get("/v1/jobs", params={"all": "true"}).json()["jobs"])
        bad = c.work / "bad.txt"
        bad.write_text('--wrap "true"\n--gpus=999 --wrap "true"\n')
        refused = c.cli("submit", "--batch", str(bad))
        assert refused.returncode == 2
        assert refused.stderr.startswith("podium: job 2 of 2: ") and "999" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert len(api.get("/v1/jobs", params={"all": "true"}).json()["jobs"]) == before

        request = {"cwd": str(c.work), "wrap": "true", "options": ["--hold"]}
        body = {"jobs": [request, request], "idempotency_key": "batch-retry-0001"}
        first = api.post("/v1/jobs/batch", json=body).json()["job_ids"]
        again = api.post("/v1/jobs/batch", json=body).json()["job_ids"]
        assert first == again and len(first) == 2  # the retry returned the first batch
        too_many = api.post("/v1/jobs/batch", json={"jobs": [request] * 10_001})
        assert too_many.status_code == 400 and "10000" in too_many.json()["error"]
        api.post("/v1/jobs/cancel", json={"job_ids": [i for ids in first for i in ids]})
    missing = c.cli("submit", "--batch", str(c.work / "nothing.txt"))
    assert missing.returncode == 2
    assert missing.stderr == (
        f"podium: cannot read the batch file {c.work}/nothing.txt: No such file or directory\n"
    )
