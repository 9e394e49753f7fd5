"""Slurm's words for ended jobs (issue 45): the reasons squeue and sacct print."""

from __future__ import annotations

from podium.api.slurm_reasons import ENDED, accounted_reason, slurm_reason
from podium.api.states import TERMINAL_STATES


def test_the_lean_ended_states_are_the_terminal_states() -> None:
    assert ENDED == TERMINAL_STATES


def test_ended_jobs_reasons_as_slurm_sets_them() -> None:
    assert slurm_reason("FAILED", None) == "NonZeroExitCode"
    assert slurm_reason("FAILED", "launch failed: ContainerError: ...") == "JobLaunchFailure"
    assert slurm_reason("TIMEOUT", "None") == "TimeLimit"
    assert slurm_reason("NODE_FAIL", "its run was lost") == "NodeDown"
    assert slurm_reason("COMPLETED", None) == slurm_reason("CANCELLED", "x") == "None"
    assert slurm_reason("PENDING", "Resources") == "Resources"


def test_sacct_keeps_none_once_started_but_a_launch_failure() -> None:
    assert accounted_reason("FAILED", "exit 3", started=True) == "None"
    assert accounted_reason("PENDING", "Priority", started=False) == "Priority"
    failed = "launch failed: cannot run /no/such/shell: No such file or directory"
    assert accounted_reason("FAILED", failed, started=True) == "JobLaunchFailure"
