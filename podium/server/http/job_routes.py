"""The job routes of the REST API: submit, list and show, control, accounting.

Each `add_*` adds one group of routes to the app, over the daemon's Controller; the
caller is who `routes.caller` says (podium.server.http.rest_api). Bodies: podium.server.http.bodies.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response

from podium.errors import SpecError
from podium.jobspec.build import SubmitRequest
from podium.jobspec.request import BatchRequest
from podium.jobspec.values import MAX_JOB_ID
from podium.server.controller import Controller
from podium.server.dry_run import dry_run_record
from podium.server.http.bodies import (
    CheckpointRequest,
    Epoch,
    JobIdPath,
    NiceRequest,
    ProgressRequest,
    SelectionBody,
    SignalRequest,
    TimeLimit,
    job_filter,
)
from podium.server.http.route_context import RouteContext, fast_json, job_of


def with_forecast(controller: Controller, record: dict[str, Any]) -> dict[str, Any]:
    """A pending job's record with its expected start and blockers (`podium show`),
    from the shared forecast: made outside the lock, not once per call."""
    if record["state"] == "PENDING":
        found = controller.forecasts.records(only=record["job_id"])["jobs"]
        record["expected_start"] = found[0]["expected_start"] if found else None
        record["expected_start_epoch"] = found[0]["expected_start_epoch"] if found else None
        record["start_kind"] = found[0]["start_kind"] if found else None
        record["no_start_reason"] = found[0]["no_start_reason"] if found else None
        record["blockers"] = found[0]["blockers"] if found else []
    return record


def add_submit_routes(app: FastAPI, ctx: RouteContext) -> None:
    """Submit (one job, a batch all or none) and dry-run."""
    controller, wake = ctx.controller, ctx.wake
    call, intake = controller.locked, controller.intake

    @app.post("/v1/jobs")
    def submit(request: Request, body: SubmitRequest) -> dict[str, Any]:
        who, clock = ctx.submitter(request), controller.clock
        jobs, warnings = call(lambda: intake.submit(body, who, clock()))
        if not body.test_only:
            wake()
        return {"jobs": jobs, "warnings": warnings}

    @app.post("/v1/jobs/batch")
    def submit_batch(request: Request, body: BatchRequest) -> dict[str, Any]:
        who, clock, jobs = ctx.submitter(request), controller.clock, list(body.jobs)
        job_ids = call(lambda: intake.submit_batch(jobs, who, clock(), body.idempotency_key))
        wake()
        return {"job_ids": job_ids}

    @app.post("/v1/jobs/dry-run")
    def dry_run(request: Request, body: SubmitRequest) -> dict[str, Any]:
        who, clock = ctx.submitter(request), controller.clock
        spec = call(lambda: intake.check(body, who, clock())).spec
        return dry_run_record(spec, who, controller.planner)


def add_read_routes(app: FastAPI, ctx: RouteContext) -> None:
    """List and show jobs, the forecast, accounting and priorities."""
    controller, caller = ctx.controller, ctx.caller
    call, views = controller.locked, controller.views

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
        if job_id.task is not None and task is not None:
            raise SpecError(f"job {job_id.job_id}_{job_id.task} names its task: leave ?task out")
        which = job_id.task if task is None else task
        return with_forecast(controller, call(views.show, job_id.job_id, caller(request), which))

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


def add_control_routes(app: FastAPI, ctx: RouteContext) -> None:
    """Cancel, signal, hold, release, requeue; time limit, nice; checkpoint and progress reports."""
    controller, caller, wake = ctx.controller, ctx.caller, ctx.wake
    call, views, control = controller.locked, controller.views, controller.control

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
        who, job = caller(request), job_of(controller, job_id)
        call(control.set_time_limit, who, job, body.time_limit_s)
        return with_forecast(controller, call(views.show, job, who))

    @app.post("/v1/jobs/{job_id}/nice")
    def nice(request: Request, job_id: JobIdPath, body: NiceRequest) -> dict[str, Any]:
        who, job = caller(request), job_of(controller, job_id)
        done = call(control.set_nice, who, job, body.nice)
        wake()
        return with_forecast(controller, call(views.show, job, who)) | {"changed": done}

    @app.post("/v1/jobs/{job_id}/checkpoint")
    def checkpoint(request: Request, job_id: JobIdPath, body: CheckpointRequest) -> dict[str, Any]:
        return call(control.checkpoint, caller(request), job_of(controller, job_id), body.step)

    @app.post("/v1/jobs/{job_id}/progress")
    def progress(request: Request, job_id: JobIdPath, body: ProgressRequest) -> dict[str, Any]:
        job = job_of(controller, job_id)
        return call(control.progress, caller(request), job, body.done, body.total)

    @app.post("/v1/jobs/requeue")
    def requeue(request: Request, body: SelectionBody) -> dict[str, Any]:
        done = call(control.requeue, caller(request), body.selection())
        return {"requeued": done, "display_ids": call(views.display_ids, done)}

    @app.post("/v1/jobs/release")
    def release(request: Request, body: SelectionBody) -> dict[str, Any]:
        done = call(control.hold, caller(request), body.selection(), False)
        wake()
        return {"released": done, "display_ids": call(views.display_ids, done)}


__all__ = ["add_control_routes", "add_read_routes", "add_submit_routes", "with_forecast"]
