"""The REST API (FastAPI). Every route answers JSON; errors are {"error": one line}.

The caller is identified by the socket's peer credentials (see `peer`), or, over the
HTTP listener, by the bearer token `http_listener.TokenGate` checked; never by anything
else in the request.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel

from podium import __version__
from podium.errors import PermissionDenied
from podium.server.controller import Caller, Controller
from podium.server.http.cluster_routes import add_admin_routes, add_node_routes
from podium.server.http.dashboard import add_dashboard, cookie_name
from podium.server.http.http_errors import add_error_handlers
from podium.server.http.job_routes import add_control_routes, add_read_routes, add_submit_routes
from podium.server.http.peer import SCOPE_KEY, PeerCred, process_cwd
from podium.server.http.route_context import RouteContext
from podium.server.http.sessions import SessionBook
from podium.server.http.token_routes import add_token_routes
from podium.server.http.tokens import TokenBook
from podium.server.http.watch_routes import add_watch_routes


class ErrorBody(BaseModel):
    """Every error: one line saying what is wrong and what would be right."""

    error: str


# The error shapes every route may answer (in /openapi.json): all are ErrorBody.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": what}
    for status, what in (
        (400, "the request is malformed or asks for something impossible"),
        (401, "over HTTP: no token, or not a valid one"),
        (403, "not yours to see or change, or a read-only token asking to change"),
        (404, "no such job, node, token or route"),
        (503, "the state disk is full, or the daemon cannot serve now"),
    )
}


def create_app(
    controller: Controller,
    wake: Callable[[], None],
    stop: Callable[[], None],
    tokens: TokenBook | None = None,
    sessions: SessionBook | None = None,
) -> FastAPI:
    """The API over `controller`; `wake` prompts a scheduling pass, `stop` the shutdown;
    with `tokens`, the routes that make, list and revoke the HTTP listener's tokens, and
    with `sessions` too, the dashboard. The routes are in groups: jobs
    (podium.server.http.job_routes), the cluster and its administrator
    (podium.server.http.cluster_routes), watches, tokens and the dashboard."""
    app = FastAPI(
        title="Podium",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        responses=ERROR_RESPONSES,
    )

    def caller(request: Request) -> Caller:
        cred: PeerCred | None = request.scope.get(SCOPE_KEY)
        if cred is None:
            raise PermissionDenied("caller unknown: connect through the unix socket")
        return controller.caller(cred.uid, cred.gid)

    def submitter(request: Request) -> Caller:
        """The caller, with the directory its process is in (a job's working directory
        there needs no look as the user)."""
        cred: PeerCred | None = request.scope.get(SCOPE_KEY)
        who = caller(request)
        if cred is None or cred.pid <= 0:  # over HTTP: no process to read a directory of
            return who
        return who._replace(cwd=process_cwd(cred.pid))

    add_error_handlers(app)

    @app.get("/v1/ping")
    async def ping(request: Request) -> dict[str, Any]:
        who = caller(request)
        return {
            "version": __version__,
            "pid": os.getpid(),
            "node": controller.node.name,
            "you": who.name,
            "admin": who.is_admin,
            "cluster_name": controller.config.cluster_name,
            "kill_wait_s": controller.config.kill_wait_s,
            "max_array_size": controller.config.max_array_size,
            "http": controller.config.http.listen,
            "config_file": controller.config_file,
        }

    ctx = RouteContext(controller, caller, submitter, wake, stop)
    for add in (add_submit_routes, add_read_routes, add_control_routes, add_node_routes,
                add_admin_routes):  # fmt: skip
        add(app, ctx)
    add_watch_routes(app, controller, caller)
    if tokens is not None:
        add_token_routes(app, controller, tokens, caller)
        if sessions is not None:
            http = controller.config.http
            cookie = cookie_name(http.listen, http.tls)
            add_dashboard(app, tokens, sessions, controller.locked, cookie, http.tls)
    app.openapi = lambda: podium_openapi(app)  # type: ignore[method-assign]
    return app


def podium_openapi(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document as the API answers: an invalid request is a 400 with
    ErrorBody (the handler above), never FastAPI's default 422, so that shape is dropped."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        app.openapi_schema = schema
    return app.openapi_schema
