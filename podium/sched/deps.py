"""Dependency evaluation (after, afterok, afternotok, afterany, singleton)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from podium.api.states import TERMINAL_STATES
from podium.jobspec.job import Dependency

_TERMINAL = TERMINAL_STATES
_NOT_STARTED = {"PENDING", "REQUEUED"}


class DepStatus(Enum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


def _one_job(kind: str, state: str | None) -> DepStatus:
    if state is None:  # unknown or purged: nothing left to wait for
        return DepStatus.SATISFIED
    if kind == "after":
        return DepStatus.WAITING if state in _NOT_STARTED else DepStatus.SATISFIED
    if state not in _TERMINAL:
        return DepStatus.WAITING
    if kind == "afterany":
        return DepStatus.SATISFIED
    if kind == "afterok":
        return DepStatus.SATISFIED if state == "COMPLETED" else DepStatus.NEVER
    return DepStatus.NEVER if state == "COMPLETED" else DepStatus.SATISFIED  # afternotok


def _combine(statuses: list[DepStatus], any_mode: bool) -> DepStatus:
    if not statuses:
        return DepStatus.SATISFIED
    if any_mode:
        if DepStatus.SATISFIED in statuses:
            return DepStatus.SATISFIED
        if all(s is DepStatus.NEVER for s in statuses):
            return DepStatus.NEVER
        return DepStatus.WAITING
    if DepStatus.NEVER in statuses:
        return DepStatus.NEVER
    if all(s is DepStatus.SATISFIED for s in statuses):
        return DepStatus.SATISFIED
    return DepStatus.WAITING


def evaluate(
    dependencies: tuple[Dependency, ...],
    any_mode: bool,
    job_states: Mapping[int, str],
    array_members: Mapping[int, tuple[int, ...]],
    singleton_busy: bool,
) -> DepStatus:
    """Evaluate a job's dependency clauses.

    A job id that names an array stands for all its tasks. `singleton_busy` is True
    when another job of the same user and name is running or ahead in the queue.
    """
    statuses: list[DepStatus] = []
    for dep in dependencies:
        if dep.kind == "singleton":
            statuses.append(DepStatus.WAITING if singleton_busy else DepStatus.SATISFIED)
            continue
        for job_id in dep.job_ids:
            members = array_members.get(job_id, (job_id,))
            per_task = [_one_job(dep.kind, job_states.get(m)) for m in members]
            statuses.append(_combine(per_task, any_mode=False))
    return _combine(statuses, any_mode)
