"""What long commands say while they work (issue 44, item 4): plain lines on a pipe,
each part's start and end with how long it took; nothing with PODIUM_PROGRESS=off;
the error line a failed job's output gives (item 5)."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

from podium.cli.progress_bar import Progress, while_working
from podium.cli.yardstick import error_line

TRACE = Path(__file__).resolve().parents[1] / "sim" / "data" / "tiresias_60_job.csv"


def test_plain_lines_on_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PODIUM_PROGRESS", raising=False)
    out = io.StringIO()
    with Progress("podium sim", out, every_s=0) as progress:
        task = progress.task("fifo", total=200, unit="jobs")
        task.update(50)
        task.finish("avg JCT 12 s")
    lines = out.getvalue().splitlines()
    assert lines[0] == "podium sim: fifo: started (200 jobs)"
    assert lines[1].startswith("podium sim: fifo: 50 of 200 jobs (25 %), ")
    assert lines[2].startswith("podium sim: fifo: avg JCT 12 s in ")
    monkeypatch.setenv("PODIUM_PROGRESS", "off")
    quiet = io.StringIO()
    with Progress("podium sim", quiet, every_s=0) as progress:
        progress.task("fifo", total=2).update(1)
    assert quiet.getvalue() == ""


def test_while_working_returns_or_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PODIUM_PROGRESS", "off")
    assert while_working("podium x", "y", lambda: (time.sleep(0.05), 7)[1], tick_s=0.01) == 7

    def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        while_working("podium x", "y", fails)


def test_while_working_on_a_pipe_is_quiet_unless_slow(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Quick work prints nothing, a failure no line of its own (the caller's one-line
    error is the only line), slow work a line each interval and one at the end."""
    monkeypatch.delenv("PODIUM_PROGRESS", raising=False)
    assert while_working("podium x", "y", lambda: 3) == 3

    def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        while_working("podium x", "y", fails)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(Progress.__init__, "__defaults__", (None, 0.05))
    while_working("podium x", "y", lambda: time.sleep(0.3), tick_s=0.02)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("podium x: y: still working, "), said
    assert said[-1].startswith("podium x: y: done in "), said


def test_podium_sim_says_what_it_replays(tmp_path: Path) -> None:
    """A replay no longer runs silent: each policy's start and end, with its result
    and time, on stderr; the table on stdout as before."""
    done = subprocess.run(
        [sys.executable, "-m", "podium", "sim", str(TRACE), "--nodes", "4", "--gpus-per-node",
         "4", "--policies", "fifo,fifo-backfill"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stderr.splitlines()
    assert "podium sim: fifo-backfill (the baseline): started (60 jobs)" in said
    assert any(ln.startswith("podium sim: fifo: avg JCT 217.5 s in ") for ln in said), said
    assert "podium sim" not in done.stdout and "fifo-backfill" in done.stdout


def test_a_failed_jobs_own_words() -> None:
    traceback = (
        "Traceback (most recent call last):\n  File x\nRuntimeError: Numpy is not available\n"
    )
    assert error_line("# table\n" + traceback) == "RuntimeError: Numpy is not available"
    missing = "collective_perf: torch is not installed on vm: install podium[torch] there\n"
    assert error_line(missing) == missing.strip()
    assert error_line("all fine\n") is None
    assert error_line("\x1b[31mfatal error: x\x1b[0m") is not None
    assert "\x1b" not in (error_line("\x1b[31mfatal error: x\x1b[0m") or "")
