"""An elastic job's resizes in the store: decided, done, the cap on its next start."""

from __future__ import annotations

from pathlib import Path

from podium.store.db import RunningStart, Store
from podium.store.resize_table import RESIZE, elastic_state
from tests.unit.store.test_db import spec


def test_a_resize_is_recorded_requeued_without_a_restart_and_capped_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    [job] = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    assert not store.start_resize(job, 2, 1, "shrink 2->1 for job 9", 2.0)  # not running
    store.mark_running([RunningStart(job, "n0", (0, 1), 2, 100, "/o", "/o")], 2.0)
    assert store.start_resize(job, 2, 1, "shrink 2->1 for job 9", 3.0)
    assert not store.start_resize(job, 2, 1, "again", 3.5)  # one at a time
    row = store.job(job)
    assert row["preempt_mode"] == RESIZE
    assert elastic_state(row)["resizing"] == {"from": 2, "to": 1, "cause": "shrink 2->1 for job 9",
                                              "time": 3.0}  # fmt: skip
    assert store.requeue_resized(job, 4.0)
    row = store.job(job)
    state = elastic_state(row)
    assert (row["state"], row["restart_count"], row["preempt_mode"]) == ("PENDING", 0, None)
    assert state["cap"] == 1 and state["resizes"][0]["done"] == 4.0 and "resizing" not in state
    assert [e["kind"] for e in store.events(job)][-2:] == ["resizing", "resize"]
    store.mark_running([RunningStart(job, "n0", (0,), 1, 100, "/o", "/o")], 5.0)
    state = elastic_state(store.job(job))
    assert "cap" not in state and len(state["resizes"]) == 1  # the cap held for one start
    assert elastic_state({"elastic_state": "not json"}) == {}


def test_a_resize_the_run_never_finished_is_dropped_with_an_event(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    [job] = store.insert_jobs(spec(), uid=1, gid=1, user="u", now=1.0)
    store.mark_running([RunningStart(job, "n0", (0, 1), 2, 100, "/o", "/o")], 2.0)
    assert not store.drop_resize(job, "nothing open", 2.5)
    assert store.start_resize(job, 2, 1, "shrink 2->1 for job 9", 3.0)
    assert store.drop_resize(job, "the run ended NODE_FAIL", 4.0)
    state = elastic_state(store.job(job))
    assert "resizing" not in state and not state.get("resizes")
    last = store.events(job)[-1]
    assert (last["kind"], last["detail"]) == (
        "resize dropped",
        "2->1 dropped: the run ended NODE_FAIL",
    )
