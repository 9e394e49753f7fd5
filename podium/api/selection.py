"""Which jobs a command means: a `Selection` to act on, a `JobFilter` to list (the
Backend protocol's arguments). Standard library only, and no typing: `podium queue`
and `podium cancel` build them on the client's lean path."""

from __future__ import annotations

from podium.api.fields import Fields


class Selection(Fields):
    """Jobs to act on: ids, and/or filters (as scancel)."""

    __slots__ = ("job_ids", "name", "states", "user")

    def __init__(
        self,
        job_ids: tuple[int, ...] = (),
        user: str | None = None,
        name: str | None = None,
        states: tuple[str, ...] | None = None,
    ) -> None:
        self.job_ids = job_ids
        self.user = user
        self.name = name
        self.states = states


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


__all__ = ["JobFilter", "Selection"]
