"""The REST API's errors in Podium's shape: {"error": one line}, whatever raised them
(Podium's errors, a request that fails validation, routing's own refusals, a bug)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from podium.api.text import printable
from podium.errors import PodiumError


def add_error_handlers(app: FastAPI) -> None:
    """Answer every error of `app` as one line of JSON, with its status."""

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


__all__ = ["add_error_handlers"]
