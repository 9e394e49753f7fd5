"""Which jobs a command means: a `Selection` to act on, a `JobFilter` to list (the
Backend protocol's arguments). Standard library only, and no typing: `podium queue`
and `podium cancel` build them on the client's lean path."""

from __future__ import annotations

from podium.api.fields import Fields

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from typing import Any


class Selection(Fields):
    """Jobs to act on: ids (an array's id: all its tasks), array tasks as (array id,
    index) (scancel 12_3), and/or filters (as scancel)."""

    __slots__ = ("job_ids", "name", "states", "tasks", "user")

    def __init__(
        self,
        job_ids: tuple[int, ...] = (),
        user: str | None = None,
        name: str | None = None,
        states: tuple[str, ...] | None = None,
        tasks: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.job_ids = job_ids
        self.user = user
        self.name = name
        self.states = states
        self.tasks = tasks


class JobFilter(Fields):
    """Which jobs a listing shows: pending and running ones unless `states` names
    others or `finished` asks for every job; `since`/`until` bound accounting."""

    __slots__ = ("finished", "name", "since", "states", "until", "user")

    def __init__(
        self,
        states: tuple[str, ...] | None = None,
        user: str | None = None,
        name: str | None = None,
        finished: bool = False,
        since: float | None = None,
        until: float | None = None,
    ) -> None:
        self.states = states
        self.user = user
        self.name = name
        self.finished = finished
        self.since = since
        self.until = until

    def listed_states(self) -> tuple[str, ...] | None:
        """The states a listing shows: those named, else every state (None) for
        `finished`, else pending and running."""
        if self.states is not None:
            return tuple(self.states)
        return None if self.finished else ("PENDING", "RUNNING")

    def pick(self, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The job records this filter selects by state, user and name, by job id
        (what a backend that reads every record and filters it itself uses)."""
        wanted = {s.strip().upper() for s in self.states or () if s.strip()}
        if not wanted and not self.finished:
            wanted = {"PENDING", "RUNNING"}
        if wanted:
            jobs = [j for j in jobs if j["state"] in wanted]
        if self.user:
            jobs = [j for j in jobs if j["user"] == self.user]
        if self.name:
            jobs = [j for j in jobs if j["name"] == self.name]
        return sorted(jobs, key=lambda j: j["job_id"])

    def within(self, jobs: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """The records that ran between `since` and `until` (accounting's window): ended
        at or after `since` (running ones end `now`), started at or before `until`."""
        if self.since is not None:
            since = self.since
            jobs = [j for j in jobs if (j.get("end_epoch") or now) >= since]
        if self.until is not None:
            until = self.until
            jobs = [j for j in jobs if (j.get("start_epoch") or 0) <= until]
        return jobs


class BadJobId(ValueError):
    """A word that names no job; `text` is the word."""

    def __init__(self, text: str) -> None:
        super().__init__(f"{text!r} is not a job id (expected a number like 42 or 42_3)")
        self.text = text


def job_refs(
    words: list[str] | tuple[str, ...],
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Job ids and array tasks from user words (each may hold several, comma-separated):
    "12" names job 12 (an array: all its tasks), "12_3" task 3 of array 12 alone.
    Raises BadJobId naming a word that is neither."""
    ids: list[int] = []
    tasks: list[tuple[int, int]] = []
    for word in words:
        for part in word.split(","):
            text = part.strip()
            base, sep, index = text.partition("_")
            numbers = [base, index] if sep else [base]
            if not all(n.isascii() and n.isdigit() for n in numbers):
                raise BadJobId(text)
            if sep:
                tasks.append((int(base), int(index)))
            else:
                ids.append(int(base))
    return tuple(ids), tuple(tasks)


__all__ = ["BadJobId", "JobFilter", "Selection", "job_refs"]
