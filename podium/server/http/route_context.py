"""What the REST API's route groups share: the Controller, who calls, and the daemon's
wake and stop; and the fast JSON answer for big listings."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from fastapi import Request
from fastapi.responses import Response

from podium.server.controller import Caller, Controller


class RouteContext(NamedTuple):
    """The daemon as the routes see it: `caller(request)` (the peer's identity),
    `submitter(request)` (the caller with its working directory), `wake()` prompts a
    scheduling pass, `stop()` the shutdown."""

    controller: Controller
    caller: Callable[[Request], Caller]
    submitter: Callable[[Request], Caller]
    wake: Callable[[], None]
    stop: Callable[[], None]


def fast_json(data: Any) -> Response:
    """`data` as JSON, encoded by the json module at once: FastAPI's generic encoder
    takes seconds over 10,000 job records."""
    return Response(json.dumps(data, separators=(",", ":")), media_type="application/json")


__all__ = ["RouteContext", "fast_json"]
