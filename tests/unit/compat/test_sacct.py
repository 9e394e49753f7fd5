"""sacct and sinfo in Slurm's layouts, from Podium's records."""

from __future__ import annotations

from typing import Any

import pytest

from podium.compat.sacct import sacct, sinfo


def job(job_id: int, state: str = "COMPLETED", **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job_id, "display_id": str(job_id), "array_job_id": None, "name": "train",
        "partition": "main", "account": "lab", "user": "alice", "cpus": 4, "gpus": 2,
        "state": state, "exit_code": 0, "signal": None, "elapsed_s": 65.0,
        "start_time": "2026-11-23T08:00:00+00:00", "end_time": "2026-11-23T08:01:05+00:00",
        "node": "node0", "node_count": 1, "restart_count": 0, "work_dir": "/w",
        "time_limit_s": 600, "wckey": None,
        "steps": [
            {"step_id": "batch", "display_id": f"{job_id}.batch", "name": "batch",
             "state": state, "exit_code": 0, "signal": None, "elapsed_s": 65.0,
             "start_time": None, "end_time": None, "ntasks": 1, "node": "node0",
             "gpu_ids": [0, 1]},
            {"step_id": "0", "display_id": f"{job_id}.0", "name": "python3",
             "state": "FAILED", "exit_code": 3, "signal": None, "elapsed_s": 60.0,
             "start_time": None, "end_time": None, "ntasks": 2, "node": "node0",
             "gpu_ids": [0, 1]},
        ],
    }  # fmt: skip
    return base | kw


def test_default_columns_list_each_job_then_its_steps() -> None:
    out = sacct([], lambda: [job(12)]).splitlines()
    assert out[0].split() == ["JobID", "JobName", "Partition", "Account", "AllocCPUS",
                              "State", "ExitCode"]  # fmt: skip
    assert set(out[1]) == {"-", " "}
    assert out[2].split() == ["12", "train", "main", "lab", "4", "COMPLETED", "0:0"]
    assert out[3].split() == ["12.batch", "batch", "lab", "4", "COMPLETED", "0:0"]
    assert out[4].split() == ["12.0", "python3", "lab", "4", "FAILED", "3:0"]


def test_parsable_format_and_filters() -> None:
    records = [job(12), job(13, "FAILED", user="bob")]
    out = sacct(["-P", "-X", "-o", "JobID,User,State,NTasks", "-s", "FAILED"], lambda: records)
    assert out.splitlines() == ["JobID|User|State|NTasks", "13|bob|FAILED|"]
    out = sacct(["-n", "-p", "-j", "12", "--format=JobID,NTasks,AllocTRES"], lambda: records)
    assert out.splitlines() == ["12||cpu=4,gres/gpu=2|", "12.batch|1|cpu=4,gres/gpu=2|",
                                "12.0|2|cpu=4,gres/gpu=2|"]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [(["-o", "JobID,Bogus"], "invalid field 'Bogus'"), (["12"], "job ids go with -j"),
     (["--frobnicate"], "--frobnicate")],
)  # fmt: skip
def test_bad_arguments_say_what_is_wrong(args: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        sacct(args, lambda: [])


def test_sinfo_summary_and_per_node() -> None:
    nodes = [{"node": "node0", "state": "mixed", "partitions": ["main", "gpu"]}]
    assert sinfo([], nodes).splitlines() == [
        "PARTITION AVAIL  TIMELIMIT  NODES STATE  NODELIST",
        "main         up   infinite      1 mixed  node0",
        "gpu          up   infinite      1 mixed  node0",
    ]
    assert sinfo(["-N", "-h"], [dict(nodes[0], state="drained")]).splitlines()[0].split() == [
        "node0", "1", "main", "drain"]  # fmt: skip
