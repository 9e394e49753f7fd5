"""The REST API (FastAPI). Every route answers JSON; errors are {"error": one line}.

The caller is identified by the socket's peer credentials (see `peer`), or, over the
HTTP listener, by the bearer token `http_listener.TokenGate` checked; never by anything
else in the request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from podium import __version__
from podium.api.text import printable
from podium.errors import PermissionDenied, PodiumError, SpecError
from podium.jobspec.build import SubmitRequest
from podium.jobspec.request import BatchRequest
from podium.jobspec.values import MAX_JOB_ID
from podium.server.bodies import (
    CheckpointRequest,
    DrainRequest,
    Epoch,
    HealthRequest,
    InjectRequest,
    JobIdPath,
    MigApplyRequest,
    NiceRequest,
    ProgressRequest,
    ResumeRequest,
    SelectionBody,
    SignalRequest,
    TimeLimit,
    job_filter,
)
from podium.server.controller import Caller, Controller
from podium.server.dashboard import add_dashboard, cookie_name
from podium.server.dry_run import dry_run_record
from podium.server.mig_advisor import advice_now
from podium.server.mig_apply import parse_layout
from podium.server.peer import SCOPE_KEY, PeerCred, process_cwd
from podium.server.sessions import SessionBook
from podium.server.token_routes import add_token_routes
from podium.server.tokens import TokenBook
from podium.server.watch_routes import add_watch_routes


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


def fast_json(data: Any) -> Response:
    """`data` as JSON, encoded by the json module at once: FastAPI's generic encoder
    takes seconds over 10,000 job records."""
    return Response(json.dumps(data, separators=(",", ":")), media_type="application/json")


def create_app(
    controller: Controller,
    wake: Callable[[], None],
    stop: Callable[[], None],
    tokens: TokenBook | None = None,
    sessions: SessionBook | None = None,
) -> FastAPI:
    """The API over `controller`; `wake` prompts a scheduling pass, `stop` the shutdown;
    with `tokens`, the routes that make, list and revoke the HTTP listener's tokens, and
    with `sessions` too, the dashboard."""
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

    @app.exception_handler(PodiumError)
    async def podium_error(_: Request, exc: PodiumError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=exc.http_status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        return JSONResponse(
            {"error": printable(f"invalid request: {where}: {message}")}, status_code=400
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        """Routing's own refusals (no such route, a method it does not take, a body
        that cannot be read) in Podium's shape."""
        where = f"{request.method} {request.url.path}"
        if exc.status_code == 404:
            message = f"no such route: {where} (the routes are in /openapi.json)"
        elif exc.status_code == 405:
            allowed = (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow")
            message = f"{where}: method not allowed" + (f" (use {allowed})" if allowed else "")
        else:
            message = f"{where}: {exc.detail}"
        return JSONResponse(
            {"error": printable(message)}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def internal_error(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            {"error": f"internal error: {type(exc).__name__}: {exc}"}, status_code=500
        )

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

    call = controller.locked
    intake, views, control = controller.intake, controller.views, controller.control

    def with_forecast(record: dict[str, Any]) -> dict[str, Any]:
        """A pending job's record with its expected start and blockers (`podium show`),
        from the shared forecast: made outside the lock, not once per call."""
        if record["state"] == "PENDING":
            found = controller.forecasts.records(only=record["job_id"])["jobs"]
            record["expected_start"] = found[0]["expected_start"] if found else None
            record["expected_start_epoch"] = found[0]["expected_start_epoch"] if found else None
            record["blockers"] = found[0]["blockers"] if found else []
        return record

    @app.post("/v1/jobs")
    def submit(request: Request, body: SubmitRequest) -> dict[str, Any]:
        who, clock = submitter(request), controller.clock
        jobs, warnings = call(lambda: intake.submit(body, who, clock()))
        if not body.test_only:
            wake()
        return {"jobs": jobs, "warnings": warnings}

    @app.post("/v1/jobs/batch")
    def submit_batch(request: Request, body: BatchRequest) -> dict[str, Any]:
        who, clock, jobs = submitter(request), controller.clock, list(body.jobs)
        job_ids = call(lambda: intake.submit_batch(jobs, who, clock(), body.idempotency_key))
        wake()
        return {"job_ids": job_ids}

    @app.post("/v1/jobs/dry-run")
    def dry_run(request: Request, body: SubmitRequest) -> dict[str, Any]:
        who, clock = submitter(request), controller.clock
        spec = call(lambda: intake.check(body, who, clock())).spec
        return dry_run_record(spec, who, controller.planner)

    @app.get("/v1/jobs")
    def list_jobs(
        request: Request,
        state: str | None = None,
        user: str | None = None,
        name: str | None = None,
        all: bool = False,
        fields: str | None = None,
    ) -> Response:
        caller(request)
        which = job_filter(state, user, name, finished=all)
        wanted = [f.strip() for f in fields.split(",")] if fields is not None else None
        return Response(call(views.jobs_json, which, wanted), media_type="application/json")

    @app.get("/v1/jobs/{job_id}")
    def show(
        request: Request,
        job_id: JobIdPath,
        task: Annotated[int | None, Query(ge=0, le=MAX_JOB_ID)] = None,
    ) -> dict[str, Any]:
        return with_forecast(call(views.show, job_id, caller(request), task))

    @app.post("/v1/jobs/cancel")
    def cancel(request: Request, body: SelectionBody) -> dict[str, Any]:
        selection, who = body.selection(), caller(request)
        done = call(control.cancel, who, selection)
        wake()
        return {"cancelled": done, "display_ids": call(views.display_ids, done)}

    @app.post("/v1/jobs/signal")
    def send_signal(request: Request, body: SignalRequest) -> dict[str, Any]:
        who = caller(request)
        return {
            "signalled": call(control.send_signal, who, body.selection(), body.signal, body.scope)
        }

    @app.post("/v1/jobs/hold")
    def hold(request: Request, body: SelectionBody) -> dict[str, Any]:
        done = call(control.hold, caller(request), body.selection(), True)
        return {"held": done, "display_ids": call(views.display_ids, done)}

    @app.post("/v1/jobs/{job_id}/time-limit")
    def time_limit(request: Request, job_id: JobIdPath, body: TimeLimit) -> dict[str, Any]:
        who = caller(request)
        call(control.set_time_limit, who, job_id, body.time_limit_s)
        return with_forecast(call(views.show, job_id, who))

    @app.post("/v1/jobs/{job_id}/nice")
    def nice(request: Request, job_id: JobIdPath, body: NiceRequest) -> dict[str, Any]:
        who = caller(request)
        done = call(control.set_nice, who, job_id, body.nice)
        wake()
        return with_forecast(call(views.show, job_id, who)) | {"changed": done}

    @app.post("/v1/jobs/{job_id}/checkpoint")
    def checkpoint(request: Request, job_id: JobIdPath, body: CheckpointRequest) -> dict[str, Any]:
        return call(control.checkpoint, caller(request), job_id, body.step)

    @app.post("/v1/jobs/{job_id}/progress")
    def progress(request: Request, job_id: JobIdPath, body: ProgressRequest) -> dict[str, Any]:
        return call(control.progress, caller(request), job_id, body.done, body.total)

    @app.post("/v1/jobs/requeue")
    def requeue(request: Request, body: SelectionBody) -> dict[str, Any]:
        done = call(control.requeue, caller(request), body.selection())
        return {"requeued": done, "display_ids": call(views.display_ids, done)}

    @app.post("/v1/jobs/release")
    def release(request: Request, body: SelectionBody) -> dict[str, Any]:
        done = call(control.hold, caller(request), body.selection(), False)
        wake()
        return {"released": done, "display_ids": call(views.display_ids, done)}

    @app.get("/v1/forecast")
    def forecast(request: Request) -> dict[str, Any]:
        """Each pending job's expected start (as squeue --start); see forecast_view."""
        caller(request)
        return controller.forecasts.records()

    @app.get("/v1/acct")
    def acct(
        request: Request,
        state: str | None = None,
        user: str | None = None,
        since: Epoch = None,
        until: Epoch = None,
    ) -> Response:
        caller(request)
        which = job_filter(state, user, finished=True, since=since, until=until)
        return fast_json({"jobs": call(views.acct, which)})

    @app.get("/v1/priority")
    def priority(request: Request) -> Response:
        caller(request)
        return fast_json({"jobs": call(views.priorities)})

    @app.get("/v1/mig/advice")
    def mig_advice(request: Request) -> dict[str, Any]:
        caller(request)
        return advice_now(controller.reactor, controller.config.node.gpus.type)

    @app.post("/v1/mig/apply")
    def mig_apply(request: Request, body: MigApplyRequest) -> dict[str, Any]:
        who, layout = caller(request), parse_layout(body.layout)

        def plan() -> dict[str, Any]:
            running = controller.reactor.running_rows()
            return controller.migs.request(
                who.name, who.is_admin, body.gpu, layout, running, controller.clock()
            )

        answer = call(plan)
        controller.reactor.wake()  # the GPU is fenced now: the next pass must know
        wake()
        return answer

    @app.get("/v1/share")
    def share(request: Request) -> dict[str, Any]:
        return {"shares": call(views.share), "access": views.access(caller(request))}

    @app.get("/v1/teams")
    def teams(request: Request) -> dict[str, Any]:
        caller(request)
        return {"teams": call(views.teams)}

    @app.get("/v1/nodes")
    def nodes(request: Request) -> dict[str, Any]:
        caller(request)
        return {"nodes": call(views.nodes)}

    @app.post("/v1/nodes/{node}/drain")
    def drain(request: Request, node: str, body: DrainRequest) -> dict[str, Any]:
        who = caller(request)

        def drained() -> dict[str, Any]:
            control.drain(who, node, body.reason)
            return views.nodes()[0]

        return call(drained)

    @app.post("/v1/nodes/{node}/resume")
    def resume(request: Request, node: str, body: ResumeRequest | None = None) -> dict[str, Any]:
        who = caller(request)

        def resumed() -> dict[str, Any]:
            control.resume(who, node, body.gpu if body else None)
            return views.nodes()[0]

        result = call(resumed)
        wake()
        return result

    @app.post("/v1/health")
    async def health(request: Request, body: HealthRequest) -> dict[str, Any]:
        who = caller(request)
        agent = controller.agent
        if agent is None:
            raise SpecError("this daemon runs no health agent")
        if body.deep and not who.is_admin:
            raise PermissionDenied("deep health checks are for the administrator")
        results = await asyncio.to_thread(agent.run_now, body.deep)
        await asyncio.to_thread(call, agent.handle, results, controller.clock())
        wake()
        return {"node": controller.node.name, "results": [r.to_json() for r in results]}

    @app.post("/v1/inject")
    def inject(request: Request, body: InjectRequest) -> dict[str, Any]:
        who = caller(request)
        if body.kind == "xid":
            if body.gpu is None:
                raise SpecError("an Xid needs the GPU: podium inject xid --gpu N")
            where = call(control.inject_xid, who, body.gpu, body.code)
            return {"kind": "xid", "gpu": body.gpu, "code": body.code, "written_to": where}
        if body.job_id is None:
            raise SpecError(f"a {body.kind} needs the job: podium inject {body.kind} JOB")
        pid = call(control.inject, who, body.kind, body.job_id, body.rank)
        return {"job_id": body.job_id, "rank": body.rank, "pid": pid, "kind": body.kind}

    @app.post("/v1/shutdown")
    def shutdown(request: Request) -> dict[str, Any]:
        who = caller(request)
        if not who.is_admin:
            raise PermissionDenied("stopping the daemon is for its owner or root")
        stop()
        return {"stopping": True, "running_jobs_kept": True}

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
