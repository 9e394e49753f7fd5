"""Job states as Slurm names them, and which of them are final. Standard library only:
the lean client, the scheduler and the backends all read it."""

from __future__ import annotations

#: States a job never leaves (REQUEUED is a passage back to PENDING, not an end).
TERMINAL_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
    }
)

__all__ = ["TERMINAL_STATES"]
