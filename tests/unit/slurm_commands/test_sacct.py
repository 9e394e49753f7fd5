"""sacct and sinfo in Slurm's layouts, from Podium's records."""

from __future__ import annotations

from typing import Any

import pytest

from podium.slurm_commands.sacct import sacct
from podium.slurm_commands.sinfo import sinfo


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
    filters = ["-s", "FAILED", "-S", "2020-01-01"]  # Slurm: -s alone means now, so no end
    out = sacct(["-P", "-X", "-o", "JobID,User,State,NTasks", *filters], lambda: records)
    assert out.splitlines() == ["JobID|User|State|NTasks", "13|bob|FAILED|"]
    out = sacct(["-P", "-X", "-o", "JobID", "-s", "FAILED"], lambda: records)
    assert out.splitlines() == ["JobID"]  # as Slurm's sacct -s F without -S
    out = sacct(["-n", "-p", "-j", "12", "--format=JobID,NTasks,AllocTRES"], lambda: records)
    assert out.splitlines() == ["12||billing=4,cpu=4,gres/gpu=2,mem=0M,node=1|",
                                "12.batch|1|cpu=4,gres/gpu=2|",
                                "12.0|2|cpu=4,gres/gpu=2|"]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [(["-o", "JobID,Bogus"], 'Invalid field requested: "Bogus"'), (["12"], "job ids go with -j"),
     (["--frobnicate"], "--frobnicate")],
)  # fmt: skip
def test_bad_arguments_say_what_is_wrong(args: list[str], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        sacct(args, lambda: [])


def test_sinfo_summary_and_per_node() -> None:
    nodes = [{"node": "node0", "state": "mixed", "partitions": ["main", "gpu"]}]
    assert sinfo([], lambda: nodes).splitlines() == [
        "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST",  # as Slurm 22.05's sinfo
        "main         up   infinite      1    mix node0",
        "gpu          up   infinite      1    mix node0",
    ]
    drained = [dict(nodes[0], state="drained")]
    assert sinfo(["-N", "-h"], lambda: drained).splitlines()[0].split() == [
        "node0", "1", "main", "drain"]  # fmt: skip


def test_each_repeated_option_adds_to_its_list() -> None:
    """Issue 27, item 4: `sacct -j 30 -j 31` answers both (submitit watches its jobs
    so); -u, -s and --name likewise."""
    records = [job(30), job(31, "FAILED", user="bob"), job(32, name="other")]
    out = sacct(["-X", "-n", "-P", "-o", "JobID", "-j", "30", "-j", "31"], lambda: records)
    assert out.splitlines() == ["30", "31"]
    out = sacct(["-XnP", "-oJobID", "-u", "alice", "-ubob", "--name", "train"], lambda: records)
    assert out.splitlines() == ["30", "31"]


def test_a_step_named_alone_and_the_fields_snakemake_reads() -> None:
    out = sacct(["-j", "12.0", "--format=Reason,JobID,State", "--noheader", "-P"],
                lambda: [job(12)])  # fmt: skip
    assert out.splitlines() == ["None|12.0|FAILED"]
    snakemake = ["-X", "--parsable2", "--clusters", "all", "--noheader",
                 "--format=JobIdRaw,State", "--starttime", "2026-11-23T14:00",
                 "--endtime", "now", "--name", "train"]  # fmt: skip
    out = sacct(snakemake, lambda: [job(12), job(13, name="x")])
    assert out.splitlines() == ["12|COMPLETED"]
    with pytest.raises(ValueError, match=r"invalid job step '12\.x'"):
        sacct(["-j", "12.x"], lambda: [job(12)])


def test_accounting_shows_a_cancelled_jobs_end_at_once_and_waiting_arrays() -> None:
    """Issue 27, item 3: a COMPLETING job (scancel'd, its processes being stopped) is
    CANCELLED to sacct; item 7: a pending array's tasks are one line."""
    records = [
        job(14, "COMPLETING", ending="CANCELLED"),
        job(16, "PENDING", display_id="16_[0-3%2]", steps=[]),
    ]
    out = sacct(["-P", "-n", "-o", "JobID,State"], lambda: records)
    assert out.splitlines()[0] == "14|CANCELLED"
    assert out.splitlines()[-1] == "16_[0-3%2]|PENDING"
    assert sacct(["-PnX", "-o", "JobID", "-s", "CA", "-S", "2020-01-01"], lambda: records) == "14"


def test_json_carries_what_torchx_and_others_read() -> None:
    import json

    doc = json.loads(sacct(["--json", "-S1970-01-01-00:00:01"],
                           lambda: [job(12), job(13, "FAILED", exit_code=3)]))  # fmt: skip
    assert [j["job_id"] for j in doc["jobs"]] == [12, 13]
    first, failed = doc["jobs"]
    assert first["state"] == {"current": "COMPLETED", "reason": "None"}
    assert failed["exit_code"] == {"status": "ERROR", "return_code": 3}
    assert [s["step"]["id"] for s in first["steps"]] == ["12.batch", "12.0"]
    assert first["time"]["limit"] == 10 and doc["errors"] == []


def test_sinfo_formats_and_groups_nodes_alike() -> None:
    nodes = [
        {"node": f"n{i}", "state": "idle", "partitions": ["main"], "cpus_total": 8,
         "cpus_alloc": 0, "mem_total_mb": 1000 * (1 + i // 2), "mem_alloc_mb": 0,
         "gpus_total": 2, "gpu_type": "h100"}
        for i in range(3)
    ]  # fmt: skip
    assert sinfo(["--format", "%P,%m", "--noconvert"], lambda: nodes).splitlines() == [
        "PARTITION,MEMORY", "main,1000", "main,2000"]  # fmt: skip
    out = sinfo(["-h", "-o", "%.4D %N %G %C"], lambda: nodes).splitlines()
    assert out == ["   3 n0,n1,n2 gpu:h100:2 0/8/0/8"]  # no %m: all three alike
    with pytest.raises(ValueError, match="format field %Q is not supported"):
        sinfo(["-o", "%Q"], lambda: nodes)


def test_the_environment_sets_formats_and_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 45: SACCT_FORMAT, SINFO_FORMAT, SQUEUE_FORMAT(2) and SLURM_TIME_FORMAT, as
    Slurm's commands read them; an option on the command line still wins."""
    import contextlib
    import io

    from podium.slurm_commands.squeue import squeue

    monkeypatch.setenv("SACCT_FORMAT", "JobID,State")
    assert sacct(["-P", "-X", "-n"], lambda: [job(12)]) == "12|COMPLETED"
    assert sacct(["-P", "-X", "-n", "-o", "JobName"], lambda: [job(12)]) == "train"
    monkeypatch.setenv("SLURM_TIME_FORMAT", "%d/%m %H:%M")
    assert sacct(["-P", "-X", "-n", "-o", "Start"], lambda: [job(12)]) == "23/11 08:00"
    monkeypatch.delenv("SLURM_TIME_FORMAT")
    assert sacct(["-P", "-X", "-n", "-o", "Start"], lambda: [job(12)]) == "2026-11-23T08:00:00"
    nodes = [{"node": "node0", "state": "idle", "partitions": ["main"]}]
    monkeypatch.setenv("SINFO_FORMAT", "%P|%t")
    assert sinfo(["-h"], lambda: nodes) == "main|idle"
    out = io.StringIO()
    monkeypatch.setenv("SQUEUE_FORMAT2", "JobID:4,State:.8")
    with contextlib.redirect_stdout(out):
        squeue(["-h"], lambda every, keys: [job(12, "RUNNING")])
    assert out.getvalue() == "12   RUNNING\n"
    monkeypatch.setenv("SQUEUE_FORMAT", "%i|%T")  # SQUEUE_FORMAT wins over FORMAT2
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        squeue(["-h"], lambda every, keys: [job(12, "RUNNING")])
    assert out.getvalue() == "12|RUNNING\n"
