"""What the REST API's route groups share: the Controller, who calls, and the daemon's
wake and stop; and the fast JSON answer for big listings."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import Response

from podium.errors import SpecError
from podium.server.controller import Caller, Controller
from podium.server.http.bodies import JobRef


class RouteContext(NamedTuple):
    """The daemon as the routes see it: `caller(request)` (the peer's identity),
    `submitter(request)` (the caller with its working directory), `wake()` prompts a
    scheduling pass, `stop()` the shutdown."""

    controller: Controller
    caller: Callable[[Request], Caller]
    submitter: Callable[[Request], Caller]
    wake: Callable[[], None]
    stop: Callable[[], None]


def job_of(controller: Controller, ref: JobRef) -> int:
    """The job id a path's job stands for: the job itself, or an array task's own row
    (its id). A task still waiting in its array's row has none to act on alone:
    SpecError says so; NotFound for a task the array does not hold."""
    if ref.task is None:
        return ref.job_id
    row = controller.locked(controller.reactor.store.task_row, ref.job_id, ref.task)
    if row["array_task_id"] != ref.task:
        raise SpecError(
            f"array task {ref.job_id}_{ref.task} still waits in its array's row: act on "
            f"the whole array ({ref.job_id}), or on the task once it has started"
        )
    return int(row["job_id"])


def fast_json(data: Any) -> Response:
    """`data` as JSON, encoded by the json module at once: FastAPI's generic encoder
    takes seconds over 10,000 job records."""
    return Response(json.dumps(data, separators=(",", ":")), media_type="application/json")


__all__ = ["RouteContext", "fast_json", "job_of"]
