"""The hang watch's clock (podium.run.hang_watch): silence counts from the last
heartbeat, and a job that has not beaten yet has the start-up allowance."""

from __future__ import annotations

import os
from pathlib import Path

from podium.run.hang_watch import STARTUP_S, HangWatch, startup_allowance


class Watch(HangWatch):
    def __init__(self, heartbeat: Path, start: float, timeout: float) -> None:
        self.start = start
        self.heartbeat = heartbeat
        self.heartbeat.touch()
        os.utime(heartbeat, (start + 1, start + 1))  # made by the supervisor at launch
        self.heartbeat_made = heartbeat.stat().st_mtime
        self.heartbeat_timeout = timeout
        self.ranks = None


def test_a_job_starting_has_the_allowance_then_the_timeout_from_its_last_beat(
    tmp_path: Path,
) -> None:
    start = 1_000_000.0
    watch = Watch(tmp_path / "heartbeat", start, timeout=40)
    assert startup_allowance(40) == STARTUP_S and startup_allowance(3600) == 3600
    assert watch._hang(start + 41) is None  # still starting: no beat yet
    assert watch._hang(start + STARTUP_S) is None
    assert watch._hang(start + STARTUP_S + 1) == (
        f"no heartbeat in the {STARTUP_S + 1:.0f}s since the start",
        [],
    )
    os.utime(watch.heartbeat, (start + 90, start + 90))  # its first beat, 90 s in
    assert watch._hang(start + 130) is None
    assert watch._hang(start + 131) == ("no heartbeat for 41s", [])


def test_a_heartbeat_file_gone_counts_as_no_beat(tmp_path: Path) -> None:
    watch = Watch(tmp_path / "heartbeat", 0.0, timeout=5)
    watch.heartbeat.unlink()
    assert watch._hang(100.0) is None
    assert watch._hang(STARTUP_S + 1)[0].startswith("no heartbeat in the")  # type: ignore[index]
