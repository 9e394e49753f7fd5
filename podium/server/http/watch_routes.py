"""What the dashboard reads beside the core API: the node's health events (findings,
fences, the recovery ladder's remedies), newest first, and the end of a job's output,
read as the job's user (`podium.run.tail_as_user`) and shown only to that user and the
administrators, as `podium show` decides."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query, Request

from podium.api.caller import Caller
from podium.api.text import printable
from podium.errors import PermissionDenied, SpecError
from podium.run.tail_as_user import TailError, tail_as_user
from podium.server.controller import Controller
from podium.server.http.bodies import JobIdPath
from podium.server.http.route_context import job_of
from podium.store.db import Row

MAX_TAIL_BYTES = 65536
MAX_EVENTS = 500


def add_watch_routes(
    app: FastAPI, controller: Controller, caller: Callable[[Request], Caller]
) -> None:
    """GET /v1/health/events, /v1/gpus/telemetry and /v1/jobs/{job_id}/log on `app`."""

    @app.get("/v1/health/events")
    def health_events(
        request: Request, limit: Annotated[int, Query(ge=1, le=MAX_EVENTS)] = 50
    ) -> dict[str, Any]:
        """The node's health events, newest first: checks' findings, targets fenced and
        returned to service, remedies run (reset, reboot, drain), admins' drains."""
        caller(request)
        rows = controller.locked(controller.reactor.store.node_events, limit)
        return {
            "events": [
                {"time": r["time"], "node": r["node"], "kind": r["kind"], "detail": r["detail"]}
                for r in rows
            ]
        }

    @app.get("/v1/gpus/telemetry")
    def gpu_telemetry(request: Request) -> dict[str, Any]:
        """Each whole GPU's NVML values under dcgm-exporter's field names (utilisation
        in %, framebuffer in MiB, temperature, power), by GPU index; a value NVML does
        not give is left out, and declared GPUs give none. Read outside the lock."""
        caller(request)
        indices = [g.index for g in controller.node.gpus]
        read = controller.telemetry(indices) if indices else {}
        return {"gpus": {str(i): values for i, values in read.items()}}

    @app.get("/v1/jobs/{job_id}/log")
    def log_tail(
        request: Request,
        job: JobIdPath,
        stream: Literal["stdout", "stderr"] = "stdout",
        max_bytes: Annotated[int, Query(ge=1, le=MAX_TAIL_BYTES)] = 16384,
    ) -> dict[str, Any]:
        """The last `max_bytes` of a job's output (or error) file, read with the job
        user's identity: for that user and the administrators."""
        who, job_id = caller(request), job_of(controller, job)
        row: Row = controller.locked(controller.reactor.store.job, job_id)
        if row["uid"] != who.uid and not who.is_admin:
            raise PermissionDenied(
                f"job {job_id} belongs to {row['user']}: its output is for that user and "
                "the administrators"
            )
        path = row[stream]
        if not path:
            raise SpecError(f"job {job_id} has no {stream} file yet: it has not started")
        owner = controller.planner.identity(row["uid"], row["gid"], row["user"], 0o077)
        try:
            data, size = tail_as_user(owner, path, max_bytes)
        except TailError as exc:
            return {"job_id": job_id, "path": path, "text": "", "size": None,
                    "error": printable(str(exc))}  # fmt: skip
        return {
            "job_id": job_id,
            "path": path,
            "text": data.decode("utf-8", "replace"),
            "size": size,
            "error": None,
        }


__all__ = ["add_watch_routes"]
