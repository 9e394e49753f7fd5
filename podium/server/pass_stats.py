"""What the scheduling passes cost, as Slurm's sdiag counts it for its main scheduler
(schedule_cycle_last/max/tot/cnt, in microseconds, and the queue the last pass read):
kept by the reactor, read by /metrics."""

from __future__ import annotations

import threading


class PassStats:
    """Counters of the daemon's scheduling passes since it started (thread-safe: the
    passes run on a worker thread, scrapes on the API's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.last_us = 0
        self.max_us = 0
        self.total_us = 0
        self.queue_len = 0
        self.last_when: float | None = None

    def record(self, seconds: float, queue_len: int, when: float) -> None:
        """One pass of `seconds`, over `queue_len` pending jobs, ended at `when`."""
        micro = int(seconds * 1e6)
        with self._lock:
            self.count += 1
            self.last_us = micro
            self.max_us = max(self.max_us, micro)
            self.total_us += micro
            self.queue_len = queue_len
            self.last_when = when

    def snapshot(self) -> dict[str, float | int | None]:
        with self._lock:
            return {
                "count": self.count,
                "last_us": self.last_us,
                "max_us": self.max_us,
                "total_us": self.total_us,
                "queue_len": self.queue_len,
                "last_when": self.last_when,
            }


__all__ = ["PassStats"]
