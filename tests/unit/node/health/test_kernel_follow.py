"""podium.node.health.kernel_follow: an Xid written to the kernel's log is noticed at
once; other lines, and what was there before, are not news."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from podium.node.health.kernel_follow import FILE_POLL_S, KernelLogFollower

XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python, GPU has fallen off the bus\n"


def _follow(path: Path) -> tuple[KernelLogFollower, threading.Event]:
    seen = threading.Event()
    follower = KernelLogFollower(path, False, seen.set)
    assert follower.start() is None
    return follower, seen


def test_an_xid_appended_to_the_file_is_news_within_a_poll(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text(XID)  # history: the periodic check's, not the follower's
    follower, seen = _follow(log)
    try:
        with open(log, "a") as fh:
            fh.write("usb 1-1: new device\n")
        assert not seen.wait(4 * FILE_POLL_S)
        started = time.monotonic()
        with open(log, "a") as fh:
            fh.write(XID)
        assert seen.wait(5) and time.monotonic() - started < 1.0
    finally:
        follower.stop()


def test_a_rotated_log_is_followed_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "kern.log"
    log.write_text("x" * 1000)
    follower, seen = _follow(log)
    try:
        log.rename(tmp_path / "kern.log.1")
        log.write_text(XID)  # a new, shorter file
        assert seen.wait(5)
    finally:
        follower.stop()


def test_a_source_that_cannot_be_opened_says_why(tmp_path: Path) -> None:
    follower = KernelLogFollower(tmp_path / "missing", False, lambda: None)
    assert "cannot follow" in (follower.start() or "")
    follower = KernelLogFollower(tmp_path / "missing", True, lambda: None)
    assert "No such file" in (follower.start() or "")


def test_stop_ends_a_kmsg_follower_at_once() -> None:
    """A daemon's stop must not wait on the kernel's next message."""
    import os

    import pytest

    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here")
    follower = KernelLogFollower(Path("/dev/kmsg"), True, lambda: None)
    assert follower.start() is None
    time.sleep(0.1)  # its thread is blocked reading by now: stop must wake it
    started = time.monotonic()
    follower.stop()
    assert time.monotonic() - started < 0.5
    follower.stop()  # twice is harmless
