"""Bounds on what one request may cost the daemon, on every socket (the unix socket's
local users as much as the HTTP listener's): `RequestLimits`, an ASGI wrapper.

- **Bodies are bounded before they are read.** Each route has a cap (`body_cap`): 4 KiB
  for the dashboard's login, a submission its 4 MiB script bound with room for JSON's
  escapes and the environment, a batch of submissions 64 MiB, anything else 64 KiB. A
  Content-Length over the cap is answered 413 at once, the body never read; a chunked
  body is read only up to the cap. A body is answered 408 when `IDLE_TIMEOUT_S` pass
  with no byte of it, or when it takes longer than IDLE_TIMEOUT_S plus its size (its
  Content-Length, else the cap) at `MIN_RATE` bytes a second: a client sending a byte
  now and then holds a connection for a bounded time.
- **HEAD is answered wherever GET is** (RFC 9110: the same headers, no body), so a
  read-only token's HEAD works on every route it may GET.

The time a client may take over its request line and headers is bounded in the
protocol itself (`podium.server.http.peer.PeerCredProtocol`, HEADER_TIMEOUT_S)."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from podium.jobspec.values import MAX_ENV_BYTES, MAX_SCRIPT_BYTES

KIB, MIB = 1 << 10, 1 << 20
LOGIN_CAP = 4 * KIB
SUBMIT_CAP = 2 * MAX_SCRIPT_BYTES + MAX_ENV_BYTES + MIB  # JSON may double a script's bytes
BATCH_CAP = 64 * MIB
DEFAULT_CAP = 64 * KIB
IDLE_TIMEOUT_S = 10.0
MIN_RATE = 64 * KIB

_CAPS: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("POST", re.compile(r"/login"), LOGIN_CAP),
    ("POST", re.compile(r"/v1/jobs(/dry-run)?"), SUBMIT_CAP),
    ("POST", re.compile(r"/v1/jobs/batch"), BATCH_CAP),
)


def body_cap(method: str, path: str) -> int:
    """The most bytes a request's body may have on this route."""
    for verb, pattern, cap in _CAPS:
        if method == verb and pattern.fullmatch(path):
            return cap
    return DEFAULT_CAP


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB else f"{n // KIB} KiB"


class TooLarge(Exception):
    """A body went past its route's cap."""


class RequestLimits:
    """ASGI wrapper: body caps and read timeouts, HEAD as GET (see the module
    docstring)."""

    def __init__(self, app: Any, idle_timeout_s: float = IDLE_TIMEOUT_S) -> None:
        self.app = app
        self.idle_timeout_s = idle_timeout_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        cap = body_cap(method, path)
        where = f"{method} {path}"
        headers = dict(scope.get("headers") or ())
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await answer(send, 400, f"{where}: Content-Length {length[:20]!r} is not a number")
                return
            if int(length) > cap:
                await answer(send, 413, _too_large(where, cap), close=True)
                return
        expected = int(length) if length is not None else cap
        whole_s = self.idle_timeout_s + expected / MIN_RATE
        try:
            body = await asyncio.wait_for(_read_body(receive, cap, self.idle_timeout_s), whole_s)
        except TooLarge:
            await answer(send, 413, _too_large(where, cap), close=True)
            return
        except TimeoutError:
            await answer(send, 408, f"{where}: the request body came too slowly (nothing for "
                         f"{self.idle_timeout_s:g} s, or over {whole_s:.0f} s in all)",
                         close=True)  # fmt: skip
            return
        if body is None:  # the client went away
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            after: dict[str, Any] = await receive()  # after the body: only a disconnect
            return after

        if method == "HEAD":
            scope = dict(scope, method="GET")
            send = _without_body(send)
        await self.app(scope, replay, send)


async def _read_body(receive: Any, cap: int, idle_s: float) -> bytes | None:
    """The whole body, refused past `cap` bytes (TooLarge) or when `idle_s` pass with
    nothing new (TimeoutError); None on a disconnect."""
    chunks: list[bytes] = []
    have = 0
    while True:
        message = await asyncio.wait_for(receive(), idle_s)
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        have += len(chunk)
        if have > cap:
            raise TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _too_large(where: str, cap: int) -> str:
    hint = " (a script is at most 4 MiB: put large data in files the job reads)"
    return f"{where}: the request body is larger than the {_size(cap)} this route takes" + (
        hint if cap >= SUBMIT_CAP else ""
    )


def _without_body(send: Any) -> Any:
    """`send` for a HEAD: the GET's status and headers, never its body."""

    async def head_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if not message.get("more_body", False):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send(message)

    return head_send


async def answer(send: Any, status: int, message: str, close: bool = False) -> None:
    """A one-line JSON error, `{"error": message}` (with `close`: the connection is
    closed after it, as for a body left unread)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["IDLE_TIMEOUT_S", "MIN_RATE", "RequestLimits", "answer", "body_cap"]
