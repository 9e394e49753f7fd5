"""The HTTP listener beside the unix socket: a TCP socket the same server answers on
(with TLS when `http.tls_cert` and `http.tls_key` name a certificate), and `TokenGate`,
which gives each request that came over TCP the caller its bearer token names, or, for
the dashboard, its login session (`podium.server.http.sessions`: read-only, whatever its
token may do). Requests on the unix socket carry the kernel's peer credentials and pass
through untouched; a TCP request never can claim them (the gate overwrites the scope
key).

Before any of that, the Host header must name this listener: an IP address,
`localhost`, or one of `http.host_names`; a page of another site that a DNS name was
pointed at this machine for (DNS rebinding) is refused. What needs no token:
/openapi.json, the login and logout, the dashboard's assets, and /metrics unless
`http.metrics_token`."""

from __future__ import annotations

import ipaddress
import json
import socket
import ssl
from collections.abc import Collection
from typing import Any

from podium.config.http_config import HttpListener, split_listen
from podium.errors import ConfigError
from podium.server.http.cookies import cookie_values
from podium.server.http.dashboard import ASSETS, KEY_HEADER, is_page
from podium.server.http.peer import SCOPE_KEY, TOKEN_KEY, PeerCred
from podium.server.http.sessions import SessionBook
from podium.server.http.tokens import TokenBook

SESSION_KEY = "podium.session"  # scope key: True when the dashboard's session asks
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


def tls_context(http: HttpListener) -> ssl.SSLContext | None:
    """The server's TLS context from `http.tls_cert` and `http.tls_key` (None without
    them). Raises ConfigError (one line) when they cannot be loaded."""
    if http.tls_cert is None or http.tls_key is None:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(http.tls_cert, http.tls_key)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc
        raise ConfigError(
            f"http.tls_cert {http.tls_cert} / http.tls_key {http.tls_key}: cannot load them: "
            f"{reason} (give a PEM certificate chain and its unencrypted private key)"
        ) from None
    return context


def host_name(header: bytes) -> str:
    """The host name of a Host header, lower-cased, without its port or brackets."""
    text = header.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    if text.count(":") > 1:  # a bare IPv6 address: no port to take off
        return text
    name, sep, port = text.rpartition(":")
    return name if sep and port.isdigit() else text


def named_here(header: bytes | None, names: Collection[str]) -> bool:
    """Whether a Host header names this listener: an IP address (no DNS name to rebind),
    localhost, or a configured name. No header at all (HTTP/1.0, not a browser) passes."""
    if header is None:
        return True
    name = host_name(header)
    if name == "localhost" or name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class TokenGate:
    """ASGI wrapper: a TCP request (no peer credentials in its scope) goes on as its
    token's user, or its dashboard session's (reads only), or is answered 400 (a Host
    that does not name this listener), 401 (no token or session, or not a valid one) or
    403 (a read-only token or a session asking to change something)."""

    def __init__(
        self,
        app: Any,
        book: TokenBook,
        sessions: SessionBook,
        cookie: str,
        metrics_open: bool,
        host_names: Collection[str] = (),
    ) -> None:
        self.app = app
        self.book = book
        self.sessions = sessions
        self.cookie = cookie
        self.host_names = frozenset(n.lower() for n in host_names)
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
        headers = dict(scope.get("headers") or ())
        if not named_here(headers.get(b"host"), self.host_names):
            shown = host_name(headers.get(b"host", b""))[:80]
            await refuse(send, 400, f"Host {shown!r} does not name this listener: use its "
                         "address or localhost, or add the name to http.host_names")  # fmt: skip
            return
        if scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        kind, _, value = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if kind.lower() == "bearer" and value.strip():
            await self._as_token(value.strip(), scope, receive, send)
        else:
            await self._as_session(headers, scope, receive, send)

    async def _as_token(self, value: str, scope: Any, receive: Any, send: Any) -> None:
        token = self.book.check(value)
        if token is None:
            await refuse(send, 401, "the token is not valid (malformed, unknown, expired or "
                         "revoked): podium token list shows yours")  # fmt: skip
            return
        if token.read_only and scope["method"] not in READ_METHODS:
            await refuse(send, 403, f"token {token.token_id} is read-only: it may look, "
                         "not submit, cancel or change anything")  # fmt: skip
            return
        scope[SCOPE_KEY] = PeerCred(0, token.uid, token.gid)
        scope[TOKEN_KEY] = token.token_id
        await self.app(scope, receive, send)

    async def _as_session(
        self, headers: dict[bytes, bytes], scope: Any, receive: Any, send: Any
    ) -> None:
        page = scope["method"] in READ_METHODS and is_page(scope["path"])
        # every value of the cookie: another port of this host may have set one of its
        # own (a more specific Path is sent first), which must not shadow the real one
        session_ids = cookie_values(headers.get(b"cookie", b""), self.cookie)
        session_id = session_ids[0] if session_ids else ""
        key = None if page else headers.get(KEY_HEADER, b"").decode("latin-1")
        token = next(
            (t for t in (self.sessions.check(s, key) for s in session_ids) if t is not None),
            None,
        )
        if token is None:
            if page:  # a browser: to the login page
                await _redirect(send, "/login")
            elif not session_id:
                await refuse(send, 401, "no token: send the header Authorization: Bearer "
                             "TOKEN (podium token create makes one)")  # fmt: skip
            elif not key:
                await refuse(send, 401, "the dashboard's session reads only from its own "
                             "page (its page key is missing): log in again there")  # fmt: skip
            else:
                await refuse(send, 401, "the dashboard's session is not valid (expired, "
                             "logged out, or its token revoked): log in again")  # fmt: skip
            return
        if scope["method"] not in READ_METHODS:
            # the dashboard only looks: a session never changes anything (no CSRF)
            await refuse(send, 403, "the dashboard's login only reads: send a token in "
                         "an Authorization header to change anything")  # fmt: skip
            return
        scope[SCOPE_KEY] = PeerCred(0, token.uid, token.gid)
        scope[SESSION_KEY] = True
        await self.app(scope, receive, send)


async def _redirect(send: Any, where: str) -> None:
    headers = [(b"location", where.encode()), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def refuse(send: Any, status: int, message: str) -> None:
    """A one-line JSON error (401s name the Bearer scheme)."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="podium"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = [
    "READ_METHODS",
    "SESSION_KEY",
    "TOKEN_KEY",
    "TokenGate",
    "bind_tcp",
    "host_name",
    "named_here",
    "tls_context",
]
