"""Waiting in tests: poll a condition to a deadline instead of sleeping a fixed time
(a fixed sleep is too short on a loaded machine and too long on an idle one). Every
test waits through these two; a test that must let time pass says why in a comment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(
    get: Callable[[], T],
    test: Callable[[T], object],
    what: str,
    timeout: float = 30.0,
    retry_on: tuple[type[Exception], ...] = (),
    every: float = 0.2,
) -> T:
    """Read `get()` until `test` holds for what it read, and return that. After
    `timeout` seconds fail naming `what` and the last value read. Exceptions of the
    `retry_on` types count as not yet (the last one is raised at the deadline).
    Polls every 20 ms at first, backing off to `every` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.02
    while True:
        try:
            value = get()
        except retry_on:
            if time.monotonic() > deadline:
                raise
        else:
            if test(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"after {timeout:g} s: {what}: {value!r:.2000}")
        time.sleep(pause)
        pause = min(pause * 1.5, every)


def wait_until(done: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """Return `done()`'s value as soon as it is true; fail naming `what` after
    `timeout` seconds."""
    return poll(done, bool, what, timeout)
