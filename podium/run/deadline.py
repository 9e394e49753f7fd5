"""A running job's time limit and its --signal time, which `scontrol update
TimeLimit=` may change while the job runs (the daemon writes JOB_DIR/limit.json; the
supervisor looks at it on every turn of its loop, at least once a second).
Standard library only: the supervisor imports it at every job start."""

from __future__ import annotations

import os
from pathlib import Path

from podium.run.files import LIMIT_FILE, read_json


class Deadline:
    """When the job times out and when its --signal is due (epoch seconds, or None)."""

    def __init__(
        self,
        job_dir: Path,
        start: float,
        limit_s: int | None,
        signal_num: int | None,
        signal_before_s: int,
    ) -> None:
        self.path = job_dir / LIMIT_FILE
        self.start = start
        self.signal_num = signal_num
        self.signal_before_s = signal_before_s
        self.signalled = False
        self._seen = 0  # the limit file's mtime last read
        self._set(limit_s)

    def _set(self, limit_s: int | None) -> None:
        self.end = self.start + limit_s if limit_s else None
        self.signal_at = None
        if self.signal_num is not None and self.end is not None and not self.signalled:
            self.signal_at = self.end - self.signal_before_s

    def refresh(self) -> None:
        """Take a new limit from the limit file, if one was written since."""
        try:
            mtime = os.stat(self.path).st_mtime_ns
        except FileNotFoundError:
            return
        if mtime == self._seen:
            return
        self._seen = mtime
        value = (read_json(self.path) or {}).get("time_limit_s")
        self._set(value if isinstance(value, int) and value > 0 else None)

    def signal_sent(self) -> None:
        """The --signal went out (once per run, whatever the limit becomes)."""
        self.signalled = True
        self.signal_at = None

    def wait_s(self, now: float, most: float = 1.0) -> float:
        """How long the loop may sleep before the next moment due."""
        wait = most
        for moment in (self.signal_at, self.end):
            if moment is not None:
                wait = min(wait, max(0.0, moment - now))
        return wait
