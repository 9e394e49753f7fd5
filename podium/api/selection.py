"""Which jobs a command means: a `Selection` to act on, a `JobFilter` to list (the
Backend protocol's arguments; standard library only)."""

from __future__ import annotations

from typing import NamedTuple


class Selection(NamedTuple):
    """Jobs to act on: ids, and/or filters (as scancel)."""

    job_ids: tuple[int, ...] = ()
    user: str | None = None
    name: str | None = None
    states: tuple[str, ...] | None = None


class JobFilter(NamedTuple):
    """Which jobs a listing shows: pending and running ones unless `states` names
    others or `finished` asks for every job; `since`/`until` bound accounting."""

    states: tuple[str, ...] | None = None
    user: str | None = None
    name: str | None = None
    finished: bool = False
    since: float | None = None
    until: float | None = None


__all__ = ["JobFilter", "Selection"]
