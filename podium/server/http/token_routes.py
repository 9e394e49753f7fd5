"""The REST API's token routes: make, list and revoke the bearer tokens the HTTP
listener takes. Over the unix socket a user makes their own (an administrator anyone's);
over HTTP a token may make more for its own user, never for another, and a read-only
token none (the gate lets it only read); what a token makes expires no later than it
and is revoked with it (`podium.server.http.tokens`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path, Request
from pydantic import Field

from podium.api.caller import Caller
from podium.config.validation import RequestModel
from podium.server.controller import Controller
from podium.server.http.peer import TOKEN_KEY
from podium.server.http.tokens import MAX_EXPIRY_S, TokenBook

TokenIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{12}$")]


class TokenRequest(RequestModel):
    """A new token: for whom (default: you), read-only or not, and when it expires."""

    user: str | None = Field(
        default=None, max_length=64, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$"
    )
    read_only: bool = False
    expires_s: float | None = Field(default=None, gt=0, le=MAX_EXPIRY_S, allow_inf_nan=False)


def add_token_routes(
    app: FastAPI, controller: Controller, book: TokenBook, caller: Callable[[Request], Caller]
) -> None:
    """POST /v1/tokens, GET /v1/tokens and DELETE /v1/tokens/{token_id} on `app`."""

    @app.post("/v1/tokens")
    def create_token(request: Request, body: TokenRequest) -> dict[str, Any]:
        who, parent = caller(request), request.scope.get(TOKEN_KEY)
        return controller.locked(
            book.create, who, body.user, body.read_only, body.expires_s, parent
        )

    @app.get("/v1/tokens")
    def list_tokens(request: Request) -> dict[str, Any]:
        return {"tokens": book.listing(caller(request))}

    @app.delete("/v1/tokens/{token_id}")
    def revoke_token(request: Request, token_id: TokenIdPath) -> dict[str, Any]:
        return controller.locked(book.revoke, caller(request), token_id)


__all__ = ["TokenRequest", "add_token_routes"]
