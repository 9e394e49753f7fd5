"""podium.run.job_signals: scancel --signal requests, each delivered once, in order."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from podium.run.job_signals import Inbox, send


def test_each_request_is_taken_once_in_order(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path)
    assert inbox.new() == []
    send(tmp_path, signal.SIGTERM, "steps")
    send(tmp_path, signal.SIGUSR2, "steps")  # within the same clock tick: a new file
    assert inbox.new() == [(signal.SIGTERM, "steps"), (signal.SIGUSR2, "steps")]
    assert inbox.new() == []
    send(tmp_path, signal.SIGUSR1, "full")
    assert inbox.new() == [(signal.SIGUSR1, "full")]


def test_bad_requests_are_refused_or_skipped(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="scope 'all'"):
        send(tmp_path, signal.SIGTERM, "all")
    (tmp_path / "signals.json").write_text('{"sent": [{"signal": 99, "scope": "steps"}, 3]}')
    assert Inbox(tmp_path).new() == []
