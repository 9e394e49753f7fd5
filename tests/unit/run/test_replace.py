"""The supervisor's record of a job's spares (podium.run.replace): who takes part,
which spare goes next, what the job and the daemon are told."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podium import runtime
from podium.run.replace import SPARES_DROPPED, Spares, read_dropped_spares, read_replacements


def test_a_job_takes_part_only_once_it_says_ready(tmp_path: Path) -> None:
    spares = Spares(tmp_path, [[2], [3]])
    spares.create(None)
    assert spares.ready and not spares.can_replace()  # spares, but no word from the job
    (tmp_path / "replace").write_text("ready\n")
    assert spares.can_replace()
    assert spares.drop_spare_on(3) and not spares.drop_spare_on(1)  # a fault on a spare
    assert spares.take() == (0, [2], 0) and not spares.can_replace()  # none left, no standby
    assert read_dropped_spares(tmp_path) == [3]  # for the daemon to give back and refill


@pytest.mark.parametrize("stack", ["torchelastic", "torchft"])
def test_a_torchelastic_or_torchft_job_takes_part_without_a_word_and_has_no_standbys(
    tmp_path: Path, stack: str
) -> None:
    """Its replacements are TorchElastic's new nodes (podium.run.torchelastic) or
    torchft's replica groups (podium.run.torchft): nothing to write, and nothing started
    before it is needed; the stack's own membership takes the newcomer in."""
    spares = Spares(tmp_path, [[2]], stack)
    assert spares.self_joining and spares.torchelastic == (stack == "torchelastic")
    spares.create(None)
    (tmp_path / "replace").write_text("ready standby\n")  # its workers might say it: no matter
    assert spares.can_replace() and spares.standbys_due() == []
    assert spares.take() == (0, [2], 0)


@pytest.mark.parametrize("text", ['{"gpus": [3]}', '["3", 3.5, true, null]', "[[3]]", "not json"])
def test_a_dropped_spares_record_of_another_shape_names_no_gpu(tmp_path: Path, text: str) -> None:
    (tmp_path / SPARES_DROPPED).write_text(text)
    assert read_dropped_spares(tmp_path) == []


def test_warm_standbys_are_asked_for_once_and_given_with_their_spare(tmp_path: Path) -> None:
    spares = Spares(tmp_path, [[2], [3]])
    spares.create(None)
    (tmp_path / "replace").write_text("ready standby\n")
    assert spares.standbys_due() == [(0, [2]), (1, [3])]
    assert spares.standbys_due() == []  # each started once
    spares.standby.update({0: 4242, 1: 4343})
    spares.standby_ended(4343)  # spare 1's standby died: that spare starts cold
    assert spares.take() == (0, [2], 4242) and spares.take() == (1, [3], 0)


def test_each_replacement_is_told_to_the_job_and_recorded_for_the_daemon(
    tmp_path: Path,
) -> None:
    spares = Spares(tmp_path, [[2]])
    spares.create(None)
    (tmp_path / "replace").write_text("ready\n")
    told = spares.announce({"master_port": 29500, "replaced": [1], "reason": "Xid 79"})
    assert told["generation"] == 1
    line = json.loads((tmp_path / "replace").read_text())
    assert line == {"generation": 1, "master_port": 29500, "replaced": [1], "reason": "Xid 79"}
    [kept] = read_replacements(tmp_path)
    assert kept["replaced"] == [1] and kept["time"] > 0
    assert spares.takes_part()  # a generation told: it took part, whatever the file says now


def test_a_record_that_is_not_a_list_reads_as_none(tmp_path: Path) -> None:
    (tmp_path / "replacements.json").write_text('{"x": 1}')
    assert read_replacements(tmp_path) == []
    (tmp_path / "replacements.json").write_text('[1, {"replaced": [0]}]')
    assert read_replacements(tmp_path) == [{"replaced": [0]}]


def test_the_runtime_helpers_opt_in_once_and_read_the_next_generation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notice = tmp_path / "replace"
    assert not runtime.replace_ready() and runtime.replacement(timeout_s=0) is None
    notice.write_text("")
    monkeypatch.setenv("PODIUM_REPLACE_FILE", str(notice))
    assert runtime.replace_ready() and notice.read_text() == "ready\n"
    notice.write_text('{"generation": 1, "master_port": 29501}\n')
    assert runtime.replace_ready() and notice.read_text().startswith("{")  # not overwritten
    assert runtime.replacement(after=0, timeout_s=0) == {"generation": 1, "master_port": 29501}
    assert runtime.replacement(after=1, timeout_s=0.05) is None


def test_every_refill_reaches_the_supervisor_not_only_the_first(tmp_path: Path) -> None:
    """Issue 63, item 3: the daemon's orders file is a list; each refill is appended to
    it (it was rewritten as a first order each time, so the supervisor, which had read
    one, never saw a third spare and the third fault was neither replaced nor
    requeued). The supervisor's record takes each new spare once."""
    import fcntl
    import os
    import signal

    from podium.run.executor import LocalExecutor
    from podium.run.files import LOCK_FILE

    job_dir = tmp_path / "jobs" / "7"
    job_dir.mkdir(parents=True)
    spares = Spares(job_dir, [[2]])
    spares.create(None)
    executor = LocalExecutor.__new__(LocalExecutor)
    executor.jobs_dir = tmp_path / "jobs"
    fd = os.open(job_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the supervisor's lock: the job is alive
    executor._signal = lambda job_id, sig: sig == signal.SIGCHLD  # type: ignore[method-assign]
    try:
        assert executor.add_spares(7, [[1]])
        spares.take_orders()
        assert executor.add_spares(7, [[3]])
        spares.take_orders()
        spares.take_orders()  # nothing new: nothing added twice
    finally:
        os.close(fd)
    orders = json.loads((job_dir / "spares.json").read_text())
    assert [o["seq"] for o in orders] == [1, 2]
    assert spares.ready == [(0, [2]), (1, [1]), (2, [3])]
