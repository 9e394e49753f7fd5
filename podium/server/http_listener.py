"""The HTTP listener beside the unix socket: a TCP socket the same server answers on,
and `TokenGate`, which gives each request that came over TCP the caller its bearer
token names. Requests on the unix socket carry the kernel's peer credentials and pass
through untouched; a TCP request never can claim them (the gate overwrites the scope
key). What needs no token: /openapi.json, and /metrics unless `http.metrics_token`."""

from __future__ import annotations

import json
import socket
from typing import Any

from podium.config.http_config import split_listen
from podium.errors import ConfigError
from podium.server.dashboard import ASSETS, COOKIE, is_page
from podium.server.peer import SCOPE_KEY, PeerCred
from podium.server.tokens import TokenBook

TOKEN_KEY = "podium.token"  # scope key: the token's id (its user is in the peer cred)
READ_METHODS = frozenset({"GET", "HEAD"})


def bind_tcp(listen: str) -> socket.socket:
    """A listening TCP socket on `listen` (HOST:PORT). Raises ConfigError (one line)
    when it cannot be had (the address in use, not this machine's, no right to it)."""
    host, port = split_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, backlog=512)
    except OSError as exc:
        raise ConfigError(
            f"cannot listen on {listen}: {exc.strerror or exc} (http.listen / --http)"
        ) from None


class TokenGate:
    """ASGI wrapper: a TCP request (no peer credentials in its scope) goes on as its
    token's user, or is answered 401 (no token, or not a valid one) or 403 (a
    read-only token asking to change something)."""

    def __init__(self, app: Any, book: TokenBook, metrics_open: bool) -> None:
        self.app = app
        self.book = book
        self.open_paths = {"/openapi.json", "/login", "/logout"} | {
            f"/static/{name}" for name in ASSETS
        }
        if metrics_open:
            self.open_paths.add("/metrics")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get(SCOPE_KEY) is not None:
            await self.app(scope, receive, send)  # lifespan, or the unix socket's peer
            return
        scope[SCOPE_KEY] = None
        if scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        kind, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        from_cookie = kind.lower() != "bearer" or not value.strip()
        if from_cookie:  # the dashboard's login cookie
            value = cookie_value(headers.get(b"cookie", b""), COOKIE)
        token = self.book.check(value.strip()) if value.strip() else None
        if token is None:
            if scope["method"] in READ_METHODS and is_page(scope["path"]):  # a browser
                await _redirect(send, "/login")
            elif not value.strip():
                await _refuse(send, 401, "no token: send the header Authorization: Bearer "
                              "TOKEN (podium token create makes one)")  # fmt: skip
            else:
                await _refuse(send, 401, "the token is not valid (malformed, unknown, "
                              "expired or revoked): podium token list shows yours")  # fmt: skip
            return
        if from_cookie and scope["method"] not in READ_METHODS:
            # the dashboard only looks: a cookie never changes anything (no CSRF)
            await _refuse(send, 403, "the dashboard's login only reads: send the token in "
                          "an Authorization header to change anything")  # fmt: skip
            return
        if token.read_only and scope["method"] not in READ_METHODS:
            await _refuse(send, 403, f"token {token.token_id} is read-only: it may look, "
                          "not submit, cancel or change anything")  # fmt: skip
            return
        scope[SCOPE_KEY] = PeerCred(0, token.uid, token.gid)
        scope[TOKEN_KEY] = token.token_id
        await self.app(scope, receive, send)


def cookie_value(header: bytes, name: str) -> str:
    """The value of cookie `name` in a Cookie header ("" when absent)."""
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""


async def _redirect(send: Any, where: str) -> None:
    headers = [(b"location", where.encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="podium"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["READ_METHODS", "TOKEN_KEY", "TokenGate", "bind_tcp"]
