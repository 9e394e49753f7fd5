"""podium.run.stopping: a child the supervisor waits on is given up the moment the job
is stopped, with everything it started."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import psutil
import pytest

from podium.run.stopping import ChildError, Stopped, call_in_child, pending_stop
from tests.polling import wait_until

pytestmark = pytest.mark.integration  # real processes, signals and process groups


@pytest.fixture
def blocked() -> Iterator[None]:
    """SIGTERM blocked, as the supervisor keeps it; a pending one is cleared after."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        if signal.SIGTERM in signal.sigpending():
            signal.sigwait({signal.SIGTERM})
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_results_and_errors_come_back() -> None:
    assert call_in_child(lambda: {"a": [1, 2]}, None) == {"a": [1, 2]}
    with pytest.raises(ChildError, match="no such image"):
        call_in_child(lambda: (_ for _ in ()).throw(ValueError("no such image")), None)


SLEEP = ["sleep", f"600.{os.getpid()}"]  # this test's own, whatever else sleeps


def _sleeper() -> None:
    subprocess.run(SLEEP, check=False)  # a grandchild, in the child's group


def _sleepers() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == SLEEP]


def test_a_time_limit_kills_the_child_and_what_it_started() -> None:
    started = time.monotonic()
    with pytest.raises(Stopped) as stop:
        call_in_child(_sleeper, time.time() + 0.5)
    assert stop.value.state == "TIMEOUT" and time.monotonic() - started < 5
    wait_until(lambda: not _sleepers(), "what the child started to be gone", 5)
    assert not _sleepers()


def test_a_pending_cancel_stops_the_wait(blocked: None) -> None:
    # To this thread, which blocks it (a process-wide one would go to another thread).
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    assert pending_stop(None) == "CANCELLED"
    with pytest.raises(Stopped) as stop:
        call_in_child(_sleeper, None)
    assert stop.value.state == "CANCELLED"
