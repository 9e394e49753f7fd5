"""Auto-resume, pure: whether a job that ended is requeued, and why or why not.

Hardware faults (NODE_FAIL: a fenced GPU, a lost supervisor, a hang) and exit codes
the job or cluster lists as requeueable are faults; other failures are the
application's and stop the job. An exit code listed as "do not requeue" always stops
it. A job that has been restarted and keeps failing without writing a newer
checkpoint is stopped after `max_stalled` such restarts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Ended:
    """How a run of a job ended, and its auto-resume settings and history."""

    state: str  # the run's end state (NODE_FAIL, FAILED, ...)
    exit_code: int | None
    signal: int | None
    fault: bool  # Podium saw a fault (fenced hardware, a hang), whatever the state
    auto_resume: int
    restart_count: int
    requeue_exit_codes: tuple[int, ...] = ()
    no_requeue_exit_codes: tuple[int, ...] = ()
    stalled_restarts: int = 0
    progressed: bool = True  # a checkpoint newer than at the last restart exists
    max_stalled: int = 3


@dataclass(frozen=True)
class Verdict:
    requeue: bool
    reason: str
    stalled_restarts: int = 0


def status_code(exit_code: int | None, signal: int | None) -> int | None:
    """The exit status as a shell reports it: the code, or 128 + the signal."""
    if signal is not None:
        return 128 + signal
    return exit_code


def decide(e: Ended) -> Verdict:
    """Requeue or stop, with a one-line reason."""
    code = status_code(e.exit_code, e.signal)
    if e.auto_resume <= 0:
        return Verdict(False, "auto-resume is off")
    if code is not None and code in e.no_requeue_exit_codes:
        return Verdict(False, f"exit code {code} means do not requeue")
    hardware = e.fault or e.state == "NODE_FAIL"
    listed = code is not None and code in e.requeue_exit_codes and e.state == "FAILED"
    if not hardware and not listed:
        return Verdict(False, f"application error ({_describe(e)}): not a fault")
    stalled = e.stalled_restarts
    if e.restart_count > 0:
        stalled = 0 if e.progressed else stalled + 1
    if stalled >= e.max_stalled:
        return Verdict(
            False,
            f"no progress: {stalled} restarts without a newer checkpoint",
            stalled,
        )
    if e.restart_count >= e.auto_resume:
        return Verdict(False, f"auto-resume limit reached ({e.auto_resume} restarts)", stalled)
    what = "hardware fault" if hardware else f"requeue exit code {code}"
    return Verdict(True, f"{what}: restart {e.restart_count + 1} of {e.auto_resume}", stalled)


def _describe(e: Ended) -> str:
    if e.signal is not None:
        return f"signal {e.signal}"
    return f"exit code {e.exit_code}"


def newest_checkpoint(directory: str | Path, limit: int = 10_000) -> float | None:
    """The newest modification time of a file under `directory` (None if there is none);
    looks at `limit` entries at most."""
    newest: float | None = None
    seen = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            seen += 1
            if seen > limit:
                return newest
            try:
                mtime = os.stat(os.path.join(root, name)).st_mtime
            except OSError:
                continue
            if newest is None or mtime > newest:
                newest = mtime
    return newest


__all__ = ["Ended", "Verdict", "decide", "newest_checkpoint", "status_code"]
