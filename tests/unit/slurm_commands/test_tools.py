"""Slurm's commands inside jobs: what they print and what they refuse."""

from __future__ import annotations

import pytest

from podium.api.hostlist import hostlist
from podium.slurm_commands.job_tools import main
from podium.slurm_commands.scontrol_show import format_job
from podium.slurm_commands.slurm_text import slurm_duration


def test_host_lists_expand_as_slurms_and_refuse_absurd_ones() -> None:
    assert hostlist("node[01-03,7],gpu") == ["node01", "node02", "node03", "node7", "gpu"]
    with pytest.raises(ValueError, match="more than 100000 hosts"):
        hostlist("n[0-99999999]")


def test_scontrol_show_hostnames(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scontrol", "show", "hostnames", "a[1-2],b"]) == 0
    assert capsys.readouterr().out == "a1\na2\nb\n"
    assert main(["scontrol", "show", "hostnames", "n[0-99999999]"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("scontrol: error: ") and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scontrol", "frobnicate"], "expected show hostnames|job|node"),
        (["scontrol", "requeue", "12x"], "invalid job id '12x'"),
        (["scancel", "--signal=USR9", "3"], "invalid signal 'USR9': expected a name like USR1"),
        (["scancel", "--signal=USR1"], "--signal needs job ids"),
        (["scancel", "--frobnicate", "3"], "option --frobnicate is not supported here"),
        (["scancel", "-bz", "3"], "option -z (in -bz) is not supported here"),
        (["scancel", "-u"], "-u needs a value"),
        (["sattach", "12.0"], "no tool 'sattach'"),
        (["scontrol", "update", "JobId=12"], "update of nothing is not supported here"),
        (["scontrol", "update", "TimeLimit=5"], "update needs JobId=ID"),
        (["scontrol", "update", "JobId=1", "Partition=x"], "update of partition is not supported"),
        (["scontrol", "update", "JobId=1", "Priority=5"], "only Priority=0 (hold) is taken"),
        (["scontrol", "update", "JobId=1", "Nice=x"], "Nice='x': give a whole number"),
        (["scontrol", "update", "JobId"], "Key=Value words"),
    ],
)
def test_what_is_not_known_is_refused_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_show_job_writes_key_value_lines() -> None:
    job = {
        "job_id": 7, "name": "train", "user": "alice", "uid": 1000, "account": "vision",
        "partition": "main", "qos": "normal", "nice": 0, "state": "RUNNING", "reason": None,
        "restart_count": 1, "exit_code": None, "signal": None, "elapsed_s": 3725.2,
        "time_limit_s": 90000, "submit_epoch": None, "start_epoch": None, "end_epoch": None,
        "node": "node0", "node_count": 1, "cpus": 4, "ntasks": 2, "mem_mb": 8192, "gpus": 2,
        "work_dir": "/home/alice", "stdout": "/home/alice/7.out", "stderr": None,
        "array_job_id": 5, "array_task_id": 2, "comment": None, "wckey": "submitit",
    }  # fmt: skip
    lines = format_job(job).splitlines()
    assert lines[0] == "JobId=7 JobName=train"
    assert "   ArrayJobId=5 ArrayTaskId=2" in lines
    assert "   JobState=RUNNING Reason=None" in lines
    assert "   ExitCode=0:0 RunTime=01:02:05" in lines
    assert "   TimeLimit=1-01:00:00" in lines
    assert "   TRES=cpu=4,mem=8192M,node=1,gres/gpu=2" in lines
    assert lines[-1] == "   WCKey=submitit"
    assert slurm_duration(None) == "UNLIMITED" and slurm_duration(59) == "00:00:59"


def record(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "job_id": 12, "display_id": "12", "array_job_id": None, "array_task_id": None,
        "name": "train", "user": "alice", "uid": 1000, "account": "vision",
        "partition": "main", "qos": "normal", "nice": 0, "state": "RUNNING", "reason": None,
        "gpus": 2, "cpus": 4, "ntasks": 2, "node": "node0", "node_count": 1,
        "elapsed_s": 65.0, "time_limit_s": 3600, "submit_epoch": 1.8e9,
        "start_epoch": 1.8e9 + 5, "end_epoch": None, "submit_time": "2027-01-15T08:00:00+00:00",
        "start_time": None, "end_time": None, "restart_count": 0, "work_dir": "/w",
        "stdout": "/w/12.out", "stderr": None, "comment": None, "wckey": None,
        "dependency": None, "mem_mb": 8192, "exit_code": None, "signal": None,
    }  # fmt: skip
    return {**base, **kw}


def test_squeue_prints_slurms_columns(capsys: pytest.CaptureFixture[str]) -> None:
    from podium.slurm_commands.squeue import squeue

    jobs = [record(), record(job_id=13, display_id="13", state="PENDING", reason="Resources")]
    assert squeue([], lambda every, keys: jobs) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "JOBID",
        "PARTITION",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "NODES",
        "NODELIST(REASON)",
    ]
    # Slurm's order: pending before running (its sort P,t,-p)
    assert lines[2].split() == ["12", "main", "train", "alice", "R", "1:05", "1", "node0"]
    assert lines[1].split()[-1] == "(Resources)" and lines[1].split()[4] == "PD"
    assert squeue(["-h", "-t", "PD", "-o", "%i|%.5T|%l"], lambda every, keys: jobs) == 0
    assert capsys.readouterr().out == "13|PENDI|1:00:00\n"
    assert squeue(["-j", "12", "--json"], lambda every, keys: jobs) == 0
    import json

    from podium.backends.slurm.parse import job_record

    (doc,) = json.loads(capsys.readouterr().out)["jobs"]
    back = job_record(doc, 1.8e9 + 70)  # Slurm's own parser reads it back
    assert (back["job_id"], back["state"], back["gpus"], back["node"]) == (
        12,
        "RUNNING",
        2,
        "node0",
    )
    # 12_0 names job 12
    assert squeue(["-h", "-j", "12,12_0", "-o", "%i"], lambda every, keys: jobs) == 0
    assert capsys.readouterr().out == "12\n"
    assert main(["squeue", "-j", "12x"]) == 1
    assert "invalid job id '12x'" in capsys.readouterr().err
    assert main(["squeue", "-o", "%Q"]) == 1
    assert "format field %Q is not supported here" in capsys.readouterr().err


def test_squeue_fetches_the_keys_its_format_and_filters_read() -> None:
    from podium.slurm_commands.squeue import DEFAULT_FORMAT, FILTER_KEYS, format_keys

    keys = format_keys(DEFAULT_FORMAT)
    assert set(FILTER_KEYS) <= set(keys)
    assert {"display_id", "partition", "elapsed_s", "node_count", "reason", "node"} <= set(keys)
    assert "work_dir" not in keys and "work_dir" in format_keys("%Z")


def test_squeue_shows_a_pending_array_as_one_line_or_with_r_one_a_task(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from podium.slurm_commands.squeue import squeue

    pending = record(
        job_id=20, display_id="20_[2-4%1]", array_job_id=20, array_task_id=None,
        array_task_string="2-4%1", state="PENDING", reason="JobArrayTaskLimit",
    )  # fmt: skip
    running = record(job_id=21, display_id="20_1", array_job_id=20, array_task_id=1)
    jobs = [pending, running]
    assert squeue(["-h", "-o", "%i %A %K"], lambda every, keys: jobs) == 0
    assert capsys.readouterr().out.splitlines() == ["20_[2-4%1] 20 2-4%1", "20_1 20 1"]
    assert squeue(["-h", "-r", "-o", "%i %K %t"], lambda every, keys: jobs) == 0
    assert capsys.readouterr().out.splitlines() == [
        "20_2 2 PD",
        "20_3 3 PD",
        "20_4 4 PD",
        "20_1 1 R",
    ]
    assert squeue(["--json"], lambda every, keys: jobs) == 0
    import json

    from podium.backends.slurm.parse import job_record

    docs = json.loads(capsys.readouterr().out)["jobs"]
    assert docs[0]["array_task_string"] == "2-4%1"
    back = job_record(docs[0], 1.8e9)  # the Slurm backend reads a pending array back
    assert back["display_id"] == "20_[2-4%1]" and back["array_task_id"] is None
    assert job_record(docs[1], 1.8e9)["display_id"] == "20_1"


def test_scancel_and_scontrol_name_one_array_task_alone() -> None:
    from podium.slurm_commands.args import job_refs

    assert job_refs(["12_3,14", "15_0"]) == ((14,), ((12, 3), (15, 0)))
    with pytest.raises(ValueError, match="invalid job id '12_x'"):
        job_refs(["12_x"])
