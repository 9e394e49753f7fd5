"""Waiting in tests: poll a condition to a deadline instead of sleeping a fixed time
(a fixed sleep is too short on a loaded machine and too long on an idle one)."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(done: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Return as soon as `done()` is true; fail naming `what` after `timeout` seconds.
    Polls every 20 ms at first, backing off to 200 ms."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    while not done():
        assert time.monotonic() < deadline, f"after {timeout:g} s: {what}"
        time.sleep(pause)
        pause = min(pause * 1.5, 0.2)
