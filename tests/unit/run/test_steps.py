"""Step records: numbered without clashes, read back distrustfully."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from podium.run.steps import (
    MAX_RECORD_BYTES,
    create_step,
    dumps,
    finish_running,
    read_steps,
    step_record,
    update_step,
)


def record(**kw: object) -> dict[str, object]:
    base = step_record(0, name="x", ntasks=2, node="n0", gpus=[0], pgid=None, start=1.0)
    return {**base, **kw}


def test_ids_are_taken_in_order_and_never_shared(tmp_path: Path) -> None:
    assert [create_step(tmp_path, record()) for _ in range(3)] == [0, 1, 2]
    (tmp_path / "7.json").write_text("{}")  # another srun got ahead
    assert create_step(tmp_path, record()) == 8
    update_step(tmp_path, record(step_id=1, state="COMPLETED", exit_code=0, end_time=2.0))
    steps = read_steps(tmp_path)
    assert [s["step_id"] for s in steps] == [0, 1, 2, 7, 8]
    assert steps[1]["state"] == "COMPLETED" and steps[1]["end_time"] == 2.0


def test_hostile_records_are_skipped_or_cleaned(tmp_path: Path) -> None:
    hostile = record(state="HACKED", ntasks="lots", gpus=["x", 1], name=7, pids=[1, "2"])
    (tmp_path / "0.json").write_text(json.dumps(hostile))
    (tmp_path / "1.json").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "2.json")  # would block a naive reader forever
    (tmp_path / "3.json").write_text(" " * (MAX_RECORD_BYTES + 1))
    (tmp_path / "4.json").write_text("[not json")
    (tmp_path / "5.json").write_text("[1, 2]")
    steps = read_steps(tmp_path)
    assert len(steps) == 1
    assert steps[0]["state"] == "FAILED" and steps[0]["ntasks"] == 0
    assert steps[0]["gpus"] == [1] and steps[0]["name"] == "" and steps[0]["pids"] == [1]


def test_steps_ended_by_the_jobs_stop_take_its_state() -> None:
    steps = [
        record(step_id=0, state="COMPLETED", end_time=5.0),
        record(step_id=1, state="FAILED", end_time=5.0),
        record(step_id=2, state="FAILED", end_time=11.0),
        record(step_id=3, state="RUNNING"),
    ]
    out = finish_running(steps, "TIMEOUT", 12.0, stopped_at=10.0)
    assert [s["state"] for s in out] == ["COMPLETED", "FAILED", "CANCELLED", "CANCELLED"]
    assert out[3]["end_time"] == 12.0
    assert finish_running(steps, "NODE_FAIL", 12.0, None)[3]["state"] == "NODE_FAIL"


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )
)
def test_the_small_encoder_writes_what_json_reads(value: object) -> None:
    assert json.loads(dumps(value)) == value
    assert dumps(float("inf")) == dumps(float("nan")) == "null"  # as no JSON number can be


def test_a_flood_of_files_costs_a_bounded_read(tmp_path: Path, monkeypatch: Any) -> None:
    import podium.run.steps as steps_module

    monkeypatch.setattr(steps_module, "MAX_STEPS", 5)
    monkeypatch.setattr(steps_module, "MAX_ENTRIES", 20)
    monkeypatch.setattr(steps_module, "MAX_READ_BYTES", 3 * len(dumps(record())))
    for i in range(50):
        (tmp_path / f"{i}.json").write_text(dumps(record(step_id=i)))
    found = read_steps(tmp_path)
    assert 1 <= len(found) <= 3  # within the byte budget, from at most 20 entries
