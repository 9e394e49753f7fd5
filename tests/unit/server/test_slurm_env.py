"""The SLURM_* variables a job gets: sbatch's names and formats, nothing inherited."""

from __future__ import annotations

from typing import Any

from podium.api import arrays
from podium.api.caller import Caller
from podium.jobspec.build import SubmitRequest, build_job
from podium.jobspec.job import JobSpec
from podium.run.plan import Grant, LaunchPlan, TaskPlan
from podium.run.task_env import task_environment
from podium.server.embedded_admission import EmbeddedAdmission
from podium.server.slurm_env import job_variables, per_node, without_inherited
from podium.server.starting import StartingJob
from tests.unit.jobspec.test_build import NOW, config


def spec_of(*options: str) -> JobSpec:
    req = SubmitRequest(script="#!/bin/sh\n", options=list(options), cwd="/home/a/run")
    return build_job(req, config(), Caller(1000, 1000, "alice"), NOW, EmbeddedAdmission()).spec


def grant(gpu_ids: tuple[int, ...], cpus: int, mem_mb: int) -> Grant:
    return Grant(gpu_ids, gpu_ids, tuple(str(g) for g in gpu_ids), cpus, mem_mb)


def row(**kw: Any) -> StartingJob:
    base = {
        "job_id": 42,
        "name": "train",
        "partition": "main",
        "account": "alice",
        "qos": "normal",
        "user": "alice",
        "uid": 1000,
        "gid": 1000,
        "restart_count": 2,
        "array_job_id": None,
        "array_task_id": None,
    }
    return StartingJob.of_row({**base, **kw})


def test_the_forms_slurm_writes() -> None:
    assert per_node(4, 1) == "4" and per_node(4, 3) == "4(x3)"

    def array_step(indices: list[int]) -> int:
        return arrays.stride(arrays.compress(indices))

    assert array_step([0, 4, 8, 12]) == 4 and array_step([1, 2, 5]) == 1 and array_step([7]) == 1
    assert array_step([0, 2]) == 2 and array_step([0, 1, 2, 4]) == 1


def test_a_job_gets_sbatchs_variables() -> None:
    spec = spec_of("-n", "2", "-c", "3", "--gpus=h100:2", "--mem=8G", "--ntasks-per-node=2")
    env = job_variables(row(), spec, "node0", grant((1, 3), 6, 8192), "lab")
    assert env["SLURM_JOB_ID"] == env["SLURM_JOBID"] == "42"
    assert env["SLURM_JOB_NODELIST"] == env["SLURM_NODELIST"] == "node0"
    assert (env["SLURM_NTASKS"], env["SLURM_NPROCS"], env["SLURM_TASKS_PER_NODE"]) == ("2",) * 3
    assert (env["SLURM_CPUS_PER_TASK"], env["SLURM_CPUS_ON_NODE"]) == ("3", "6")
    assert (env["SLURM_JOB_GPUS"], env["SLURM_GPUS_ON_NODE"], env["SLURM_GPUS"]) == (
        "1,3",
        "2",
        "h100:2",
    )
    assert env["SLURM_MEM_PER_NODE"] == "8192" and "SLURM_MEM_PER_CPU" not in env
    assert env["SLURM_NTASKS_PER_NODE"] == "2" and env["SLURM_CLUSTER_NAME"] == "lab"
    assert (env["SLURM_RESTART_COUNT"], env["SLURM_JOB_UID"]) == ("2", "1000")
    assert env["SLURM_SUBMIT_DIR"] == "/home/a/run"
    assert "SLURM_ARRAY_TASK_ID" not in env


def test_an_array_task_knows_its_array() -> None:
    spec = spec_of("--array=0-12:4%2")
    env = job_variables(
        row(array_job_id=40, array_task_id=8), spec, "node0", grant((), 1, 4000), "x"
    )
    assert env["SLURM_ARRAY_JOB_ID"] == "40" and env["SLURM_ARRAY_TASK_ID"] == "8"
    assert [env[f"SLURM_ARRAY_TASK_{k}"] for k in ("COUNT", "MIN", "MAX", "STEP")] == [
        "4",
        "0",
        "12",
        "4",
    ]
    assert "SLURM_JOB_GPUS" not in env and env["SLURM_GPUS_ON_NODE"] == "0"


def test_another_jobs_variables_are_not_inherited() -> None:
    env = without_inherited(
        {
            "SLURM_JOB_ID": "7",
            "SLURM_STEP_ID": "0",
            "SLURM_PROCID": "3",
            "SLURM_ARRAY_TASK_ID": "1",
            "SLURM_CONF": "/etc/slurm/slurm.conf",
            "SLURM_TIME_FORMAT": "relative",
            "HOME": "/home/a",
        }
    )
    assert env == {
        "SLURM_CONF": "/etc/slurm/slurm.conf",
        "SLURM_TIME_FORMAT": "relative",
        "HOME": "/home/a",
    }


def test_each_task_knows_its_rank_and_the_jobs_times() -> None:
    plan = LaunchPlan(
        job_id=42, name="t", user="alice", uid=1000, gid=1000, groups=[], argv=["/x"],
        work_dir="/", submit_dir="/", environment={"SLURM_JOB_ID": "42"},
        tasks=[TaskPlan(0, 0, [0]), TaskPlan(1, 1, [1])], stdout="o", stderr=None, stdin=None,
        open_mode="truncate", node="node0", gpu_ids=[0, 1], cpus=2, cpus_per_task=1,
        time_limit_s=600, kill_wait_s=1.0,
    )  # fmt: skip
    env = task_environment(plan, plan.tasks[1], 29500, None, 1_800_000_000.5)
    assert (env["SLURM_PROCID"], env["SLURM_LOCALID"], env["SLURM_NODEID"]) == ("1", "1", "0")
    assert env["SLURM_GTIDS"] == "0,1" and env["SLURM_JOB_ID"] == "42"
    assert env["SLURM_JOB_START_TIME"] == "1800000000"
    assert env["SLURM_JOB_END_TIME"] == "1800000600"


def plan_environment() -> dict[str, str]:
    """Every SLURM_* variable a job can get: an array task with GPUs by each form,
    memory per node, and a task's own (the compatibility doc's test lists them)."""
    env: dict[str, str] = {}
    for gpus in ("--gpus=2", "--gpus-per-task=1", "--gpus-per-node=2"):
        for mem in ("--mem=1G", "--mem-per-cpu=1G", "--mem-per-gpu=1G"):
            spec = spec_of("-n", "2", "--ntasks-per-node=2", gpus, mem, "--array=0-3")
            row_ = row(array_job_id=1, array_task_id=0)
            env.update(job_variables(row_, spec, "node0", grant((0, 1), 2, 1024), "c"))
    plan = LaunchPlan(
        job_id=1, name="t", user="u", uid=1, gid=1, groups=[], argv=["/x"], work_dir="/",
        submit_dir="/", environment=env, tasks=[TaskPlan(0, 0, [0])], stdout="o",
        stderr=None, stdin=None, open_mode="truncate", node="node0", gpu_ids=[0], cpus=1,
        cpus_per_task=1, time_limit_s=60, kill_wait_s=1.0,
    )  # fmt: skip
    return task_environment(plan, plan.tasks[0], 1, None, 1.0)
