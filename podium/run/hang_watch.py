"""The supervisor's watch for a hung job (`--heartbeat-timeout`): how long the job
has been silent, and which ranks hung (podium.run.rank_beats).

The timeout counts from the job's last heartbeat. Before its first, the job is
starting (imports, rendezvous, a checkpoint's load) and has `startup_allowance(T)`:
the timeout or STARTUP_S, whichever is longer, as nvidia-resiliency-ext gives a first
heartbeat a timeout of its own (`initial_rank_heartbeat_timeout`). Counted from the
start, a 40 s timeout stopped a training whose three PyTorch processes took longer
than that to their first step on a loaded machine, and its restart the same way.

A mixin of podium.run.supervisor.Supervisor, apart so each stays one job's size.
Standard library only (the supervisor imports it at every job start).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from podium.run.containment import stopped_by_signal
from podium.run.rank_beats import read_beats, stalled_ranks, stopped_ranks
from podium.run.steps import running_step_pids

if TYPE_CHECKING:
    from podium.run.containment import JobContainment
    from podium.run.plan import TaskPlan


STARTUP_S = 600.0  # a job's least time to its first heartbeat


def startup_allowance(timeout: float) -> float:
    """How long a job with heartbeat timeout `timeout` may take to its first beat."""
    return max(timeout, STARTUP_S)


class HangWatch:
    """Tell a hung job and name its hung ranks; the Supervisor provides the fields."""

    start: float
    heartbeat: Path | None
    heartbeat_made: float | None  # the file's mtime as the supervisor made it
    heartbeat_timeout: float
    ranks: Path | None
    tasks: dict[int, TaskPlan]
    status: dict[int, tuple[int | None, int | None]]
    contain: JobContainment

    def _steps(self) -> list[dict[str, Any]]:
        raise NotImplementedError  # the Supervisor's

    def _silent_for(self, now: float) -> float | None:
        """Seconds since the job's last heartbeat; None before its first (the file
        as the supervisor made it, or gone)."""
        assert self.heartbeat is not None
        try:
            last = os.stat(self.heartbeat).st_mtime
        except OSError:
            return None
        if self.heartbeat_made is not None and last <= self.heartbeat_made:
            return None
        return now - max(last, self.start)

    def _hang(self, now: float) -> tuple[str, list[int]] | None:
        """Why the job is hung and the ranks named: a rank a step behind, or else one
        whose process a signal stopped, read only once the heartbeat is quiet for half
        the timeout; or no heartbeat for the whole timeout (no rank named); or, before
        the first heartbeat, none within the start-up allowance."""
        silent = self._silent_for(now)
        if silent is None:
            waited = now - self.start
            if waited > startup_allowance(self.heartbeat_timeout):
                return f"no heartbeat in the {waited:.0f}s since the start", []
            return None
        half = self.heartbeat_timeout / 2
        if self.ranks is not None and silent >= half:
            beats = read_beats(self.ranks)
            named = stalled_ranks(beats, now, half)
            if named is None and len(beats) > 1:  # the processes read only when it may tell
                named = stopped_ranks(beats, self._stopped_ranks(), now, half)
            if named is not None:
                return named[1], named[0]
        if silent > self.heartbeat_timeout:
            return f"no heartbeat for {silent:.0f}s", []
        return None

    def _stopped_ranks(self) -> list[int]:
        """The ranks whose process (or a child of it) a signal stopped: the tasks of
        the job's running step (srun) when it has one, else its own tasks; only the
        job's own processes are looked at."""
        pids = running_step_pids(self._steps()) or {
            t.procid: pid for pid, t in self.tasks.items() if pid not in self.status
        }
        members = self.contain.members()
        return [r for r, pid in pids.items() if pid in members and stopped_by_signal(pid)]


__all__ = ["STARTUP_S", "HangWatch", "startup_allowance"]
