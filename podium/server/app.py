"""The REST API (FastAPI). Every route answers JSON; errors are {"error": one line}.

The caller is identified by the socket's peer credentials (see `peer`), never by
anything in the request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from podium import __version__
from podium.api.text import printable
from podium.errors import PermissionDenied, PodiumError, SpecError
from podium.server.controller import Caller, Controller
from podium.server.mig_apply import parse_layout
from podium.server.peer import SCOPE_KEY, PeerCred, process_cwd
from podium.spec.build import SubmitRequest
from podium.spec.job import JobState
from podium.spec.request import BatchRequest
from podium.spec.validation import RequestModel
from podium.spec.values import MAX_JOB_ID

MAX_TIME_LIMIT_S = 100 * 365 * 86400
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z: the latest time a query may name
Epoch = Annotated[float | None, Query(ge=0, le=MAX_EPOCH, allow_inf_nan=False)]
JobId = Annotated[int, Field(ge=1, le=MAX_JOB_ID)]
JobIdPath = Annotated[int, Path(ge=1, le=MAX_JOB_ID)]


TaskIndex = Annotated[int, Field(ge=0, le=MAX_JOB_ID)]


class Selection(RequestModel):
    """Jobs to act on: ids, array tasks as [array id, index], and/or filters (as
    scancel)."""

    job_ids: list[JobId] = Field(default_factory=list, max_length=100_000)
    tasks: list[tuple[JobId, TaskIndex]] = Field(default_factory=list, max_length=100_000)
    user: str | None = None
    name: str | None = None
    states: list[str] | None = None


class SignalRequest(RequestModel):
    """A signal for running jobs (scancel --signal): to their srun steps, their batch
    shell (-b) or every process (-f)."""

    job_ids: list[JobId] = Field(default_factory=list, max_length=100_000)
    tasks: list[tuple[JobId, TaskIndex]] = Field(default_factory=list, max_length=100_000)
    signal: int = Field(ge=1, le=64)
    scope: Literal["steps", "batch", "full"] = "steps"


class TimeLimit(RequestModel):
    """A job's new time limit in seconds (scontrol update TimeLimit=); null: none."""

    time_limit_s: int | None = Field(ge=1, le=MAX_TIME_LIMIT_S)


class DrainRequest(RequestModel):
    reason: str


class ResumeRequest(RequestModel):
    gpu: int | None = Field(default=None, ge=0, le=1023)


class MigApplyRequest(RequestModel):
    gpu: int = Field(ge=0, le=1023)
    layout: str = Field(max_length=512)  # profiles joined by commas, or "whole"


class HealthRequest(RequestModel):
    deep: bool = False


class InjectRequest(RequestModel):
    """A fault: a hung rank (SIGSTOP) or a killed one (SIGKILL) of a running job, or an
    Xid for one GPU written where the health agent reads the kernel's messages."""

    kind: Literal["hang", "kill", "xid"]
    job_id: JobId | None = None
    rank: int = Field(default=0, ge=0, le=MAX_JOB_ID)
    gpu: int | None = Field(default=None, ge=0, le=1023)
    code: int = Field(default=79, ge=1, le=999)


def _states(text: str | None) -> list[str] | None:
    """The states a --state/-t list names (upper-cased; ALL, as squeue takes it: every
    state); None when none is given. Raises SpecError on an unknown one."""
    if text is None or text == "":
        return None
    states = [s.strip().upper() for s in text.split(",") if s.strip()]
    valid = {s.value for s in JobState}
    if "ALL" in states:
        return sorted(valid)
    bad = [s for s in states if s not in valid]
    if bad:
        raise SpecError(
            f"unknown state {bad[0]!r}: expected ALL or one of {', '.join(sorted(valid))}"
        )
    return states


def fast_json(data: Any) -> Response:
    """`data` as JSON, encoded by the json module at once: FastAPI's generic encoder
    takes seconds over 10,000 job records."""
    return Response(json.dumps(data, separators=(",", ":")), media_type="application/json")


def create_app(
    controller: Controller, wake: Callable[[], None], stop: Callable[[], None]
) -> FastAPI:
    """The API over `controller`; `wake` prompts a scheduling pass, `stop` the shutdown."""
    app = FastAPI(title="Podium", version=__version__, docs_url=None, redoc_url=None)

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
        return who._replace(cwd=process_cwd(cred.pid)) if cred is not None else who

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
        }

    @app.post("/v1/jobs")
    def submit(request: Request, body: SubmitRequest) -> dict[str, Any]:
        jobs, warnings = controller.submit(body, submitter(request))
        if not body.test_only:
            wake()
        return {"jobs": jobs, "warnings": warnings}

    @app.post("/v1/jobs/batch")
    def submit_batch(request: Request, body: BatchRequest) -> dict[str, Any]:
        job_ids = controller.submit_batch(body, submitter(request))
        wake()
        return {"job_ids": job_ids}

    @app.post("/v1/jobs/dry-run")
    def dry_run(request: Request, body: SubmitRequest) -> dict[str, Any]:
        return controller.dry_run(body, submitter(request))

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
        states = _states(state)
        if states is None and not all:
            states = [JobState.PENDING.value, JobState.RUNNING.value]
        wanted = [f.strip() for f in fields.split(",")] if fields is not None else None
        text = controller.jobs_json(states=states, user=user, name=name, fields=wanted)
        return Response(text, media_type="application/json")

    @app.get("/v1/jobs/{job_id}")
    def show(
        request: Request,
        job_id: JobIdPath,
        task: Annotated[int | None, Query(ge=0, le=MAX_JOB_ID)] = None,
    ) -> dict[str, Any]:
        return controller.show(job_id, caller(request), task)

    @app.post("/v1/jobs/cancel")
    def cancel(request: Request, body: Selection) -> dict[str, Any]:
        states = _states(",".join(body.states)) if body.states else None
        who = caller(request)
        done = controller.cancel(who, body.job_ids, body.user, body.name, states, body.tasks)
        wake()
        return {"cancelled": done}

    @app.post("/v1/jobs/signal")
    def send_signal(request: Request, body: SignalRequest) -> dict[str, Any]:
        who = caller(request)
        done = controller.send_signal(who, body.job_ids, body.tasks, body.signal, body.scope)
        return {"signalled": done}

    @app.post("/v1/jobs/hold")
    def hold(request: Request, body: Selection) -> dict[str, Any]:
        return {"held": controller.hold(caller(request), body.job_ids, True, body.tasks)}

    @app.post("/v1/jobs/{job_id}/time-limit")
    def time_limit(request: Request, job_id: JobIdPath, body: TimeLimit) -> dict[str, Any]:
        controller.set_time_limit(caller(request), job_id, body.time_limit_s)
        return controller.show(job_id, caller(request))

    @app.post("/v1/jobs/requeue")
    def requeue(request: Request, body: Selection) -> dict[str, Any]:
        return {"requeued": controller.requeue(caller(request), body.job_ids, body.tasks)}

    @app.post("/v1/jobs/release")
    def release(request: Request, body: Selection) -> dict[str, Any]:
        done = controller.hold(caller(request), body.job_ids, False, body.tasks)
        wake()
        return {"released": done}

    @app.get("/v1/acct")
    def acct(
        request: Request,
        state: str | None = None,
        user: str | None = None,
        since: Epoch = None,
        until: Epoch = None,
    ) -> Response:
        caller(request)
        jobs = controller.acct(states=_states(state), user=user, since=since, until=until)
        return fast_json({"jobs": jobs})

    @app.get("/v1/priority")
    def priority(request: Request) -> Response:
        caller(request)
        return fast_json({"jobs": controller.priorities()})

    @app.get("/v1/mig/advice")
    def mig_advice(request: Request) -> dict[str, Any]:
        caller(request)
        return controller.mig_advice()

    @app.post("/v1/mig/apply")
    def mig_apply(request: Request, body: MigApplyRequest) -> dict[str, Any]:
        answer = controller.mig_apply(caller(request), body.gpu, parse_layout(body.layout))
        wake()
        return answer

    @app.get("/v1/share")
    def share(request: Request) -> dict[str, Any]:
        return {"shares": controller.share(), "access": controller.access(caller(request))}

    @app.get("/v1/nodes")
    def nodes(request: Request) -> dict[str, Any]:
        caller(request)
        return {"nodes": controller.nodes()}

    @app.post("/v1/nodes/{node}/drain")
    def drain(request: Request, node: str, body: DrainRequest) -> dict[str, Any]:
        return controller.drain(caller(request), node, body.reason)

    @app.post("/v1/nodes/{node}/resume")
    def resume(request: Request, node: str, body: ResumeRequest | None = None) -> dict[str, Any]:
        result = controller.resume(caller(request), node, body.gpu if body else None)
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
        await asyncio.to_thread(controller.handle_health, results)
        wake()
        return {"node": controller.node.name, "results": [r.to_json() for r in results]}

    @app.post("/v1/inject")
    def inject(request: Request, body: InjectRequest) -> dict[str, Any]:
        who = caller(request)
        if body.kind == "xid":
            if body.gpu is None:
                raise SpecError("an Xid needs the GPU: podium inject xid --gpu N")
            where = controller.inject_xid(who, body.gpu, body.code)
            return {"kind": "xid", "gpu": body.gpu, "code": body.code, "written_to": where}
        if body.job_id is None:
            raise SpecError(f"a {body.kind} needs the job: podium inject {body.kind} JOB")
        pid = controller.inject(who, body.kind, body.job_id, body.rank)
        return {"job_id": body.job_id, "rank": body.rank, "pid": pid, "kind": body.kind}

    @app.post("/v1/shutdown")
    def shutdown(request: Request) -> dict[str, Any]:
        who = caller(request)
        if not who.is_admin:
            raise PermissionDenied("stopping the daemon is for its owner or root")
        stop()
        return {"stopping": True, "running_jobs_kept": True}

    return app
