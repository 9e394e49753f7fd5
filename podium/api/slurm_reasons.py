"""What Slurm says of a job that ended, in its words (stdlib only, no enum: squeue's
and sacct's lean paths read it). `podium.api.states` holds the states themselves."""

from __future__ import annotations

# The states a job never leaves, by name (states.TERMINAL_STATES, as a plain set; a
# unit test holds them equal).
ENDED = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}
)
# The reason Slurm gives a job that ended so (squeue %r, sacct Reason), by its state.
_ENDED_REASON = {
    "FAILED": "NonZeroExitCode",
    "TIMEOUT": "TimeLimit",
    "NODE_FAIL": "NodeDown",
    "OUT_OF_MEMORY": "OutOfMemory",
    "DEADLINE": "DeadLine",
}
LAUNCH_FAILED = "launch failed"  # how a supervisor's reason begins when the job never ran


def slurm_reason(state: str, reason: str | None) -> str:
    """A job's reason in Slurm's words: a waiting job's as the pass gave it; for one
    that ended, what Slurm sets (FAILED: NonZeroExitCode, or JobLaunchFailure when its
    script never started; TIMEOUT: TimeLimit; NODE_FAIL: NodeDown ...), never Podium's
    own sentence (which `podium show` keeps)."""
    if state in ENDED:
        if state == "FAILED" and (reason or "").startswith(LAUNCH_FAILED):
            return "JobLaunchFailure"
        return _ENDED_REASON.get(state, "None")
    return reason or "None"


def accounted_reason(state: str, reason: str | None, started: bool) -> str:
    """sacct's Reason: why the job waited, "None" once it started (slurmdbd keeps the
    last reason it was blocked), except JobLaunchFailure for one that never ran."""
    if started and not (state == "FAILED" and (reason or "").startswith(LAUNCH_FAILED)):
        return "None"
    return slurm_reason(state, reason)


__all__ = ["ENDED", "LAUNCH_FAILED", "accounted_reason", "slurm_reason"]
