"""Auto-resume policy: faults requeue, application errors stop, stalls stop."""

from __future__ import annotations

import os
from pathlib import Path

from podium.recover.resume import Ended, decide, newest_checkpoint, status_code


def ended(**kw: object) -> Ended:
    base: dict[str, object] = dict(
        state="NODE_FAIL", exit_code=None, signal=None, fault=True, auto_resume=3, restart_count=0
    )
    base.update(kw)
    return Ended(**base)  # type: ignore[arg-type]


def test_hardware_fault_requeues_until_the_limit() -> None:
    v = decide(ended())
    assert v.requeue and v.reason == "hardware fault: restart 1 of 3"
    v = decide(ended(restart_count=3))
    assert not v.requeue and v.reason == "auto-resume limit reached (3 restarts)"
    assert decide(ended(auto_resume=0)).reason == "auto-resume is off"


def test_exit_codes() -> None:
    app = ended(state="FAILED", exit_code=1, fault=False)
    assert not decide(app).requeue and "application error (exit code 1)" in decide(app).reason
    listed = ended(state="FAILED", exit_code=75, fault=False, requeue_exit_codes=(75,))
    assert decide(listed).requeue and "requeue exit code 75" in decide(listed).reason
    killed = ended(state="FAILED", signal=9, fault=False, requeue_exit_codes=(137,))
    assert decide(killed).requeue
    stop = ended(exit_code=3, no_requeue_exit_codes=(3,))
    assert decide(stop).reason == "exit code 3 means do not requeue"
    assert status_code(None, 15) == 143 and status_code(2, None) == 2


def test_restarts_without_progress_stop() -> None:
    v = decide(ended(restart_count=1, stalled_restarts=2, progressed=False))
    assert not v.requeue and v.reason == "no progress: 3 restarts without a newer checkpoint"
    v = decide(ended(restart_count=1, stalled_restarts=2, progressed=True))
    assert v.requeue and v.stalled_restarts == 0
    first = decide(ended(restart_count=0, progressed=False))  # the first run is not a restart
    assert first.requeue and first.stalled_restarts == 0


def test_newest_checkpoint(tmp_path: Path) -> None:
    assert newest_checkpoint(tmp_path) is None
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.pt").write_text("1")
    os.utime(tmp_path / "a" / "x.pt", (100, 100))
    (tmp_path / "y.pt").write_text("2")
    os.utime(tmp_path / "y.pt", (200, 200))
    assert newest_checkpoint(tmp_path) == 200
    assert newest_checkpoint(tmp_path / "missing") is None
