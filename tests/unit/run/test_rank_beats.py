"""Per-rank heartbeats: the rank that stopped first is named, and the files the job
writes are read as hostile."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from podium.run.containment import descendants, stopped_by_signal
from podium.run.rank_beats import (
    MAX_ENTRIES,
    lost_ranks,
    read_beats,
    read_ranks,
    read_step_seconds,
    stalled_rank,
    stalled_ranks,
    stopped_ranks,
)
from tests.polling import poll


def test_the_rank_a_step_behind_is_named_once_every_rank_is_quiet() -> None:
    beats = {0: (6, 100.0), 1: (5, 99.0), 2: (6, 100.2)}
    assert stalled_rank(beats, 104.0, 5.0) is None  # rank 2 beat 3.8 s ago
    assert stalled_rank(beats, 106.0, 5.0) == (
        "rank 1 stopped at step 5 while the others reached step 6"
    )


def test_several_ranks_behind_are_named_as_a_span() -> None:
    beats = {r: (9 if r in (8, 9, 10, 12) else 10, 0.0) for r in range(16)}
    assert stalled_rank(beats, 60.0, 5.0) == (
        "ranks 8-10,12 stopped at step 9 while the others reached step 10"
    )


def test_no_name_when_all_stopped_at_one_step_or_one_rank_only() -> None:
    assert stalled_rank({0: (5, 0.0), 1: (5, 0.0)}, 60.0, 5.0) is None
    assert stalled_rank({0: (5, 0.0)}, 60.0, 5.0) is None
    assert stalled_rank({}, 60.0, 5.0) is None


def test_only_regular_files_named_by_a_rank_are_read(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("12\n")
    (tmp_path / "1").write_text("not a step")
    (tmp_path / "notes").write_text("7")
    secret = tmp_path / "secret"
    secret.write_text("42")
    (tmp_path / "2").symlink_to(secret)  # a link is never followed
    os.mkfifo(tmp_path / "3")  # a FIFO never blocks the supervisor
    (tmp_path / "4").write_text("9" * 63 + "x" * 200)  # 64 bytes at most are read
    beats = read_beats(tmp_path)
    assert list(beats) == [0] and beats[0][0] == 12
    assert read_beats(tmp_path / "missing") == {}


def test_the_ranks_behind_are_given_with_the_line() -> None:
    beats = {0: (6, 100.0), 1: (5, 100.0), 2: (6, 100.0)}
    assert stalled_ranks(beats, 120.0, 10.0) == (
        [1], "rank 1 stopped at step 5 while the others reached step 6")  # fmt: skip
    assert stalled_ranks(beats, 105.0, 10.0) is None


def test_a_phase_within_a_step_tells_a_rank_stopped_between_two_collectives(
    tmp_path: Path,
) -> None:
    """examples/train.py writes STEP.PHASE before each collective of a step: a rank
    stopped after the gradients' all-reduce and before the loss's is behind as well."""
    (tmp_path / "0").write_text("7.2\n")
    (tmp_path / "1").write_text("7.1\n")
    (tmp_path / "2").write_text("7.2.1\n")  # not a step: left out
    beats = read_beats(tmp_path)
    assert sorted(beats) == [0, 1] and beats[1][0] == 7.1
    when = max(w for _, w in beats.values()) + 60
    assert (
        stalled_rank(beats, when, 10.0)
        == "rank 1 stopped at step 7.1 while the others reached step 7.2"
    )


def test_a_rank_may_say_what_its_step_took(tmp_path: Path) -> None:
    (tmp_path / "0").write_text("12 0.1034\n")
    (tmp_path / "1").write_text("12.2\n")  # no seconds: still a beat
    (tmp_path / "2").write_text("12 fast\n")  # seconds that are not a number: left out
    (tmp_path / "3").write_text("12 0.1 9\n")  # three words: not a beat
    assert sorted(read_ranks(tmp_path)) == [0, 1, 2]
    assert read_step_seconds(tmp_path) == {0: (12.0, 0.1034)}


def test_the_rank_silent_while_the_others_lost_a_peer_is_the_one_lost() -> None:
    """A host whose processes died says nothing; its peers' collectives fail and they
    write STEP.9 (waiting for a replacement): the rank that stays silent is lost."""
    beats = {0: (41.9, 100.0), 1: (42.0, 99.5), 2: (41.9, 100.1)}
    assert lost_ranks(beats, 100.5, 1.0) is None  # too soon: a live rank may still say 9
    assert lost_ranks(beats, 101.2, 1.0) == ([1], "rank 1 went silent while the others lost a peer")
    assert lost_ranks({**beats, 1: (42.0, 100.3)}, 101.2, 1.0) is None  # rank 1 wrote since
    assert lost_ranks({r: (41.9, 100.0) for r in range(3)}, 200.0, 1.0) is None  # none silent
    assert lost_ranks({0: (42.0, 1.0), 1: (42.0, 1.0)}, 200.0, 1.0) is None  # none lost a peer


def test_a_rank_waiting_for_a_replacement_is_never_the_hung_one() -> None:
    """STEP.9 is lower than the lost rank's next step, but it is not behind."""
    beats = {0: (41.9, 100.0), 1: (42.0, 99.0), 2: (41.9, 100.0)}
    assert stalled_ranks(beats, 200.0, 5.0) is None


def test_a_rank_stopped_inside_a_collective_is_named_by_its_process() -> None:
    """Stopped (SIGSTOP) after it wrote its mark, in the collective its peer waits in:
    the marks tie, and the process's state names it once every rank is quiet."""
    beats = {0: (12.0, 100.0), 1: (12.0, 100.1)}
    assert stalled_ranks(beats, 120.0, 10.0) is None  # same mark: the marks cannot tell
    assert stopped_ranks(beats, [1], 120.0, 10.0) == (
        [1],
        "rank 1 stopped at step 12 (its process stopped by a signal) while the others "
        "reached step 12",
    )
    assert stopped_ranks(beats, [1], 105.0, 10.0) is None  # not quiet long enough
    assert stopped_ranks(beats, [], 120.0, 10.0) is None  # none stopped
    assert stopped_ranks(beats, [0, 1], 120.0, 10.0) is None  # all: the job's own doing
    many = {r: (7.1, 0.0) for r in range(6)}
    assert stopped_ranks(many, [2, 3, 4], 60.0, 5.0) == (
        [2, 3, 4],
        "ranks 2-4 stopped at step 7.1 (their processes stopped by a signal) while the "
        "others reached step 7.1",
    )
    first = stopped_ranks({0: (1.0, 0.0)}, [1], 60.0, 5.0)
    assert first is not None and "rank 1 stopped before its first step" in first[1]
    both = stopped_ranks({0: (1.0, 0.0)}, [1, 2], 60.0, 5.0)
    assert both is not None and "ranks 1-2 stopped before their first step" in both[1]


def test_a_process_or_its_child_stopped_by_a_signal_is_seen_as_stopped() -> None:
    """A real process: stopped by SIGSTOP (state T), running again after SIGCONT; a
    shell whose child is stopped counts as stopped (the rank is the whole tree)."""
    shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
    try:
        [child] = poll(lambda: descendants(shell.pid), len, "the shell's child")
        assert not stopped_by_signal(shell.pid)
        os.kill(child, signal.SIGSTOP)
        poll(lambda: stopped_by_signal(shell.pid), bool, "the stopped child seen")
        assert stopped_by_signal(child)
        os.kill(child, signal.SIGCONT)
        poll(lambda: stopped_by_signal(shell.pid), lambda s: not s, "the child running again")
        assert not stopped_by_signal(2**22 + 12345)  # no such process
    finally:
        shell.kill()
        shell.wait()


def test_with_the_world_known_no_other_name_crowds_a_rank_out(tmp_path: Path) -> None:
    """Issue 60, item 8: only the first MAX_ENTRIES names of the directory were read,
    so a job that wrote other names first hid its real slow rank. Knowing the world,
    the readers open ranks 0..world-1 by name."""
    for junk in range(MAX_ENTRIES + 10):
        (tmp_path / f"x{junk}").write_text("1 0.5")
    (tmp_path / "0").write_text("7 0.05")
    (tmp_path / "1").write_text("7 0.90")
    (tmp_path / "2").write_text("7 0.05")  # not a rank of a world of 2
    assert read_step_seconds(tmp_path, world=2) == {0: (7.0, 0.05), 1: (7.0, 0.9)}
    assert len(read_step_seconds(tmp_path)) <= 3  # listed order: maybe none of them
