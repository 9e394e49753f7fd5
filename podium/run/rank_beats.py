"""Per-rank heartbeats: each rank of a job writes the training step it reached to a file
of its own (`podium.runtime.rank_step`, or `echo STEP > $PODIUM_RANK_BEATS/$RANK`), and
the supervisor names the rank that stopped first.

A rank that hangs holds the others in their next collective, so every rank falls
quiet; what tells the culprit is that it stopped a step behind. A job whose ranks
write their step once its computation is done and before the collective (as
examples/train.py does, from DDP's hook on the last bucket: examples/ddp_marks.py)
gets the hung rank named once every rank has been quiet for half its heartbeat
timeout, before the job-wide heartbeat would fire.

A rank whose collective failed because a peer was lost, and which waits for Podium's
next generation (the replace contract), writes STEP.9: a host whose processes all
died says nothing, and the rank that stays silent while the others say 9 is the
one lost (`lost_ranks`; the Slurm backend's replica keeper acts on it).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

RANKS_DIR = "ranks"  # in the job's directory, owned by the job's user
MAX_ENTRIES = 4096  # read at most this many names of it (the daemon reads it too)
_STEP = re.compile(r"[0-9]{1,18}(\.[0-9])?")
WAITING_PHASE = 9  # STEP.9: the rank lost a peer and waits for Podium's next generation
_SECONDS = re.compile(r"[0-9]{1,9}(\.[0-9]{1,9})?")


def make_ranks_dir(path: Path, creds: tuple[int, int] | None) -> None:
    """Make the ranks' directory anew (mode 0700), owned by `creds` (uid, gid) when given:
    the job's ranks write in it; nothing of an earlier run is left."""
    shutil.rmtree(path, ignore_errors=True)  # never follows a link the job put there
    path.mkdir(mode=0o700)
    if creds is not None:
        os.chown(path, creds[0], creds[1], follow_symlinks=False)


def read_beats(directory: Path, world: int | None = None) -> dict[int, tuple[float, float]]:
    """rank -> (step, when it was written), from `directory` (`read_ranks`)."""
    return {rank: (step, when) for rank, (step, when, _) in read_ranks(directory, world).items()}


def read_step_seconds(directory: Path, world: int | None = None) -> dict[int, tuple[float, float]]:
    """rank -> (its step, the seconds its last step took outside the collectives), for
    the ranks that say (`read_ranks`)."""
    said = read_ranks(directory, world).items()
    return {r: (step, s) for r, (step, _, s) in said if s is not None}


def read_ranks(
    directory: Path, world: int | None = None
) -> dict[int, tuple[float, float, float | None]]:
    """rank -> (step, when it was written, its step's seconds or None), from
    `directory`. A file holds `STEP[.PHASE] [SECONDS]`: STEP.PHASE (PHASE 0-9) is the
    collective within the step a rank is about to enter, as examples/train.py writes
    it (a rank that stops between two collectives of one step is then behind too);
    SECONDS what its last step took outside the collectives (a straggler's are longer:
    `podium.recover.stragglers`). The files are the user's: only regular files named
    by a rank number count, opened without following a link or blocking on a FIFO, 64
    bytes at most; a file that holds no step is left out. With `world` (the job's
    ranks, when the reader knows it) only ranks 0..world-1 count, and a directory
    holding more than MAX_ENTRIES names is read by those names, so nothing else the
    job puts there can crowd a rank out; without it, the first MAX_ENTRIES names
    listed are read. Either way at most MAX_ENTRIES files are opened, and a directory
    of a few names costs no open of a file that is not there."""
    beats: dict[int, tuple[float, float, float | None]] = {}
    try:
        with os.scandir(directory) as entries:  # the job's: one more than is ever read
            names = [e.name for _, e in zip(range(MAX_ENTRIES + 1), entries, strict=False)]
    except OSError:
        return beats
    if world is None:
        names = names[:MAX_ENTRIES]
    elif len(names) > MAX_ENTRIES:  # more names than are read: the ranks, by name
        names = [str(rank) for rank in range(min(world, MAX_ENTRIES))]
    else:
        names = [n for n in names if n.isdigit() and int(n) < world]
    for name in names:
        if not name.isdigit() or len(name) > 6:
            continue
        try:
            fd = os.open(directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            text = os.read(fd, 64).decode(errors="replace") if stat.S_ISREG(info.st_mode) else ""
        except OSError:
            text = ""
        finally:
            os.close(fd)
        words = text.split()
        if 1 <= len(words) <= 2 and _STEP.fullmatch(words[0]):
            seconds = words[1] if len(words) == 2 else None
            took = float(seconds) if seconds and _SECONDS.fullmatch(seconds) else None
            beats[int(name)] = (float(words[0]), info.st_mtime, took)
    return beats


def stalled_rank(beats: dict[int, tuple[float, float]], now: float, quiet_s: float) -> str | None:
    """The hang in one line ("rank 1 stopped at step 5 while the others reached step
    6") when every rank has been quiet for `quiet_s` and some, not all, stopped at an
    earlier step than the rest; else None (a rank still beating, or no rank behind)."""
    found = stalled_ranks(beats, now, quiet_s)
    return None if found is None else found[1]


def stalled_ranks(
    beats: dict[int, tuple[float, float]], now: float, quiet_s: float
) -> tuple[list[int], str] | None:
    """The ranks behind and the hang in one line (`stalled_rank`), or None. A rank
    waiting for a replacement (WAITING_PHASE) is never behind: it lost a peer."""
    beats = {rank: beat for rank, beat in beats.items() if not is_waiting(beat[0])}
    if len(beats) < 2 or any(now - when < quiet_s for _, when in beats.values()):
        return None
    lowest = min(step for step, _ in beats.values())
    behind = sorted(rank for rank, (step, _) in beats.items() if step == lowest)
    if len(behind) == len(beats):
        return None
    reached = min(step for step, _ in beats.values() if step > lowest)
    return (
        behind,
        f"{_named(behind)} stopped at step {lowest:g} while the others reached step {reached:g}",
    )


def stopped_ranks(
    beats: dict[int, tuple[float, float]], stopped: list[int], now: float, quiet_s: float
) -> tuple[list[int], str] | None:
    """The ranks whose process is stopped by a signal (`stopped`, as the supervisor
    reads them: podium.run.containment.stopped_by_signal) and the hang in one line,
    once every rank has been quiet for `quiet_s`; None while one still beats, or when
    none or all are stopped. The marks cannot name a rank stopped inside a
    collective: its peers wait in the same one, at the same mark (`stalled_ranks`)."""
    if not stopped or any(now - when < quiet_s for _, when in beats.values()):
        return None
    others = [step for rank, (step, _) in beats.items() if rank not in stopped]
    if not others:
        return None
    ranks = sorted(stopped)
    their, processes = ("its", "process") if len(ranks) == 1 else ("their", "processes")
    marks = [beats[rank][0] for rank in ranks if rank in beats]
    where = f"at step {min(marks):g}" if marks else f"before {their} first step"
    return ranks, (
        f"{_named(ranks)} stopped {where} ({their} {processes} stopped by a signal) "
        f"while the others reached step {min(others):g}"
    )


def is_waiting(step: float) -> bool:
    """Whether a rank's mark is STEP.9 (WAITING_PHASE)."""
    return round(step * 10) % 10 == WAITING_PHASE


def lost_ranks(
    beats: dict[int, tuple[float, float]], now: float, grace_s: float
) -> tuple[list[int], str] | None:
    """The ranks lost with their host, and why in one line, or None: some ranks said
    they lost a peer (STEP.9) at least `grace_s` ago, and the others have not written
    since the first of them did. A rank still alive writes again within a step (its
    own failed collective), so what stays silent is what was lost; a host whose
    processes died, or was cut off, cannot say so itself."""
    waiting = [when for step, when in beats.values() if is_waiting(step)]
    if not waiting or len(waiting) == len(beats):
        return None
    since = min(waiting)
    if now - since < grace_s:
        return None
    silent = sorted(
        r for r, (step, when) in beats.items() if not is_waiting(step) and when <= since
    )
    if not silent:
        return None
    return silent, f"{_named(silent)} went silent while the others lost a peer"


def _named(ranks: list[int]) -> str:
    """[3] -> "rank 3"; [0, 1, 2, 5] -> "ranks 0-2,5"."""
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_span(ranks)}"


def _span(ranks: list[int]) -> str:
    """0,1,2,5 -> "0-2,5"."""
    parts: list[str] = []
    start = prev = ranks[0]
    for rank in [*ranks[1:], None]:
        if rank is not None and rank == prev + 1:
            prev = rank
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if rank is not None:
            start = prev = rank
    return ",".join(parts)


__all__ = [
    "MAX_ENTRIES",
    "RANKS_DIR",
    "WAITING_PHASE",
    "is_waiting",
    "lost_ranks",
    "make_ranks_dir",
    "read_beats",
    "read_ranks",
    "read_step_seconds",
    "stalled_rank",
    "stalled_ranks",
    "stopped_ranks",
]
