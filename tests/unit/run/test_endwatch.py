"""The end-of-run pipe: a supervisor's byte wakes the daemon's watcher; without a
reader, telling costs nothing and never blocks or raises."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

from podium.run.endwatch import END_FIFO, notify_ended, watch_ended


def test_a_notice_reaches_the_watcher(tmp_path: Path) -> None:
    woken = threading.Event()
    watch_ended(str(tmp_path), woken.set)
    fifo = tmp_path / END_FIFO
    assert stat.S_ISFIFO(fifo.stat().st_mode) and stat.S_IMODE(fifo.stat().st_mode) == 0o600
    notify_ended(str(tmp_path))
    assert woken.wait(5)


def test_telling_nobody_is_harmless(tmp_path: Path) -> None:
    notify_ended(str(tmp_path))  # no pipe
    os.mkfifo(tmp_path / END_FIFO, 0o600)
    notify_ended(str(tmp_path))  # a pipe nobody reads: ENXIO, ignored, not blocked
    (tmp_path / "target").write_text("x")
    (tmp_path / END_FIFO).unlink()
    (tmp_path / END_FIFO).symlink_to(tmp_path / "target")
    notify_ended(str(tmp_path))  # a link is not followed
    assert (tmp_path / "target").read_text() == "x"
