"""The scheduling policy: pure functions over a snapshot, with the clock passed in.

`schedule(snapshot, now)` returns Decisions (start these jobs on these GPUs; why the
others wait). No I/O, no processes, no database: the daemon, the simulator and the
benchmarks all call the same code.
"""

from podium.sched.core import schedule
from podium.sched.model import (
    Allocation,
    Decisions,
    GpuSlot,
    NodeView,
    PendingJob,
    Snapshot,
    Start,
)

__all__ = [
    "Allocation",
    "Decisions",
    "GpuSlot",
    "NodeView",
    "PendingJob",
    "Snapshot",
    "Start",
    "schedule",
]
