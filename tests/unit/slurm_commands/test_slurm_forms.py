"""The command forms issue 45 named, each as Slurm 22.05 prints it (the differential
suite, tests/integration/test_slurm_differential.py, holds them to the real Slurm; these
hold them without one)."""

from __future__ import annotations

import os
import pwd
from typing import Any

import pytest

from podium.slurm_commands.sacct import sacct
from podium.slurm_commands.scontrol_show import format_partition
from podium.slurm_commands.sinfo import sinfo
from podium.slurm_commands.squeue import squeue
from podium.slurm_commands.stats_tools import sprio, sshare, sstat
from tests.unit.slurm_commands.test_tools import record

ME = pwd.getpwuid(os.getuid()).pw_name
NODE: dict[str, Any] = {
    "node": "gpu-node-1", "state": "mixed", "partitions": ["main", "long"], "cpus_total": 8,
    "cpus_alloc": 2, "mem_total_mb": 16000, "mem_alloc_mb": 2000, "gpus_total": 4,
    "gpu_type": "gpu", "features": [], "reason": None,
    "partition_limits": {
        "main": {"default": True, "priority_tier": 1, "max_time_s": None},
        "long": {"default": False, "priority_tier": 2, "max_time_s": 7200},
    },
}  # fmt: skip


def _squeue(args: list[str], jobs: list[dict[str, object]], capsys: Any) -> str:
    assert squeue(args, lambda every, keys: jobs) == 0
    return str(capsys.readouterr().out)


def test_squeue_format_names_long_and_me(capsys: pytest.CaptureFixture[str]) -> None:
    jobs = [record(), record(job_id=13, display_id="13", state="FAILED", user=ME,
                             exit_code=3, reason="None", node="node0")]  # fmt: skip
    named = _squeue(["-t", "all", "-O", "JobArrayID,StateCompact,Reason"], jobs, capsys)
    assert named.splitlines() == [
        "JOBID               ST                  REASON              ",
        "13                  F                   NonZeroExitCode     ",  # Slurm's words
        "12                  R                   None                ",
    ]
    assert _squeue(["-h", "-t", "all", "-O", "Name:.6,UserName:3"], jobs, capsys).splitlines() == [
        " train" + ME[:3].ljust(3), " trainali"]  # fmt: skip
    long = _squeue(["-l"], jobs[:1], capsys).splitlines()
    assert long[1].split() == ["JOBID", "PARTITION", "NAME", "USER", "STATE", "TIME",
                               "TIME_LIMI", "NODES", "NODELIST(REASON)"]  # fmt: skip
    assert long[2].split()[4:7] == ["RUNNING", "1:05", "1:00:00"]
    mine = _squeue(["--me", "-h", "-t", "all", "-o", "%i"], jobs, capsys)  # by uid, not $USER
    assert mine.split() == ["13"]


def test_sinfo_star_priority_tier_gres_and_long() -> None:
    out = sinfo(["-a", "-o", "%P %G %l %p %c %m"], lambda: [NODE]).splitlines()
    assert out == ["PARTITION GRES TIMELIMIT PRIO_TIER CPUS MEMORY",
                   "main* gpu:4 infinite 1 8 16000", "long gpu:4 2:00:00 2 8 16000"]  # fmt: skip
    by_node = sinfo(["-N", "-l"], lambda: [NODE]).splitlines()
    assert by_node[1].split() == ["NODELIST", "NODES", "PARTITION", "STATE", "CPUS", "S:C:T",
                                  "MEMORY", "TMP_DISK", "WEIGHT", "AVAIL_FE", "REASON"]  # fmt: skip
    assert by_node[2].startswith("gpu-node-1      1     main*") and " mixed 8 " in by_node[2]


def test_sacct_cuts_with_a_plus_and_scontrol_shows_partitions() -> None:
    done = record(state="CANCELLED", end_time="2027-01-15T08:02:00+00:00", steps=[])
    out = sacct(["-X", "-o", "JobID,State%5,JobName%3"], lambda: [done]).splitlines()
    assert out == ["JobID        State Job ", "------------ ----- --- ",
                   "12           CANC+ tr+ "]  # fmt: skip
    shown = format_partition("main", dict(NODE["partition_limits"]["main"], nodes=["n1"],
                                          cpus=8, mem=16000, gpus=4))  # fmt: skip
    assert "PartitionName=main" in shown and "Default=YES" in shown
    assert "MaxTime=UNLIMITED" in shown and "PriorityTier=1" in shown


def test_sprio_sshare_and_sstat() -> None:
    weights = {"age": 0, "fairshare": 0, "qos": 0, "jobsize": 100, "partition": 10000}
    waiting = {"job_id": 7, "partition": "main", "user": "alice", "priority": 10050.0,
               "age": 0.0, "fairshare": 0.0, "qos_factor": 0.0, "jobsize": 0.5,
               "partition_factor": 1.0, "nice": 0, "held": False, "reason": "Resources",
               "weights": weights}  # fmt: skip
    held = dict(waiting, job_id=8, held=True, reason="JobHeldUser")
    out = sprio([], lambda: [waiting, held]).splitlines()
    assert out[0].split() == ["JOBID", "PARTITION", "PRIORITY", "SITE", "JOBSIZE", "PARTITION"]
    assert out[1].split() == ["7", "main", "10050", "0", "50", "10000"] and len(out) == 2
    assert sprio(["-j", "8"], lambda: [waiting, held]) == (
        "Unable to find jobs matching user/id(s) specified")  # fmt: skip
    shares = [{"account": "lab", "user": None, "raw_shares": 1, "norm_shares": 1.0,
               "raw_usage": 30.0, "effective_usage": 1.0, "fairshare": 0.5},
              {"account": "lab", "user": "alice", "raw_shares": 1, "norm_shares": 1.0,
               "raw_usage": 30.0, "effective_usage": 1.0, "fairshare": 0.5}]  # fmt: skip
    assert sshare(["-P"], lambda: shares).splitlines()[1:] == [
        "root|||0.000000|30|1.000000|", " lab||1|1.000000|30|1.000000|0.500000",
        "  lab|alice|1|1.000000|30|1.000000|0.500000"]  # fmt: skip
    running = record(steps=[{"step_id": "batch", "state": "RUNNING", "ntasks": 1},
                            {"step_id": "0", "state": "RUNNING", "ntasks": 2}])  # fmt: skip
    text, errors = sstat(["-n", "-P", "-j", "12", "-o", "JobID,NTasks"], lambda j: running)
    assert (text, errors) == ("12.0|2", [])
    text, errors = sstat(["-j", "12"], lambda j: record(state="COMPLETED", steps=[]))
    assert errors == ["sstat: error: No steps running for job 12"]


@pytest.mark.parametrize(
    ("tool", "args"),
    [(sinfo, ["--bogus"]), (sprio, ["--bogus"]), (sshare, ["-x"]), (sinfo, ["--fo"])],
)
def test_options_are_read_before_the_daemon_is_asked(tool: Any, args: list[str]) -> None:
    """A bad option is refused in its own words, with or without a daemon: the data
    is fetched only once the options are read."""

    def no_daemon() -> list[dict[str, Any]]:
        raise AssertionError("fetched before the options were read")

    with pytest.raises(ValueError, match=r"option|needs a value"):
        tool(args, no_daemon)


def test_squeue_bare_j_states_and_unknown_users(capsys: pytest.CaptureFixture[str]) -> None:
    """`-j` takes its value only attached or as the next word (getopt's optional
    argument, then squeue's own rule): bare, every job; states are Slurm's (full or
    compact, any case) and another is refused; an unknown user is said on stderr and
    matches no job, exit 0, as Slurm's squeue."""
    jobs = [record(), record(job_id=13, display_id="13", state="PENDING", reason="Priority")]
    assert _squeue(["-h", "-o", "%i", "-j"], jobs, capsys).split() == ["13", "12"]
    assert _squeue(["-h", "-o", "%i", "-j", "13"], jobs, capsys).split() == ["13"]
    assert _squeue(["-h", "-o", "%i", "-j13"], jobs, capsys).split() == ["13"]
    assert _squeue(["-h", "-o", "%i", "-t", "pd,r"], jobs, capsys).split() == ["13", "12"]
    with pytest.raises(ValueError, match=r"^Invalid job state specified: bogus \(valid"):
        squeue(["-t", "bogus"], lambda every, keys: jobs)
    assert _squeue(["-h", "-o", "%i", "-u", "no-such-user"], jobs, capsys) == ""
    squeue(["-h", "-u", "no-such-user"], lambda every, keys: jobs)
    assert capsys.readouterr().err == "squeue: error: Invalid user: no-such-user\n\n"


def test_state_words_of_sinfo_and_sacct_and_sstat_of_no_job() -> None:
    with pytest.raises(ValueError, match=r'^Bad state string: "bogus" \(valid states: unknown'):
        sinfo(["-t", "bogus"], lambda: [NODE])
    assert len(sinfo(["-t", "MIX,idle"], lambda: [NODE]).splitlines()) == 3
    assert len(sinfo(["-h", "-t", "idle"], lambda: [NODE]).splitlines()) == 2  # n/a lines
    with pytest.raises(ValueError, match=r"^unrecognized job state value 'bogus' \(job states"):
        sacct(["-s", "bogus"], lambda: [])
    failed = record(state="FAILED", steps=[])
    out = sacct(["-X", "-n", "-S", "2020-01-01", "-s", "f", "-o", "JobID"], lambda: [failed])
    assert out.split() == ["12"]
    text, errors = sstat(["-n", "-P", "-j", "99", "-o", "JobID"], lambda j: None)
    assert (text, errors) == ("", ["sstat: error: couldn't get steps for job 99"])
