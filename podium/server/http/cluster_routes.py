"""The cluster routes of the REST API: nodes, shares, teams and MIG; and the
administrator's: health checks, fault injection, shutdown."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request

from podium.errors import PermissionDenied, SpecError
from podium.server.http.bodies import (
    DrainRequest,
    HealthRequest,
    InjectRequest,
    MigApplyRequest,
    ResumeRequest,
)
from podium.server.http.route_context import RouteContext
from podium.server.mig_advisor import advice_now
from podium.server.mig_apply import parse_layout


def add_node_routes(app: FastAPI, ctx: RouteContext) -> None:
    """Nodes (drain, resume), shares, teams, MIG advice and apply."""
    controller, caller, wake = ctx.controller, ctx.caller, ctx.wake
    call, views, control = controller.locked, controller.views, controller.control

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


def add_admin_routes(app: FastAPI, ctx: RouteContext) -> None:
    """Health checks on request, fault injection and shutdown."""
    controller, caller, wake = ctx.controller, ctx.caller, ctx.wake
    call, control = controller.locked, controller.control

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
        ctx.stop()
        return {"stopping": True, "running_jobs_kept": True}


__all__ = ["add_admin_routes", "add_node_routes"]
