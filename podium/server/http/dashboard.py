"""The web dashboard on the HTTP listener: read-only pages served by the daemon itself
(`static/dashboard.js` and `.css`, no file from the internet). A person logs in once
with a token (`podium token create --read-only`); the login opens a session
(`podium.server.http.sessions`): a cookie the page's script cannot read (HttpOnly,
SameSite=Strict, Secure under TLS) and a page key kept in the page's own
localStorage, sent with each API read. The script polls the JSON API every 2 s (one
request at a time) and builds the page with text nodes only.

Pages: `/` (every GPU with its job, user, health and utilisation; the queue with each
pending job's reason, blockers in plain words and expected start; the node's health
events, newest first) and `/jobs/{id}` (a job's facts, goodput, blockers, timeline and
the end of its output, read as its user: its details are its user's and the
administrators', as `podium show` decides). Every page forbids framing and inline
scripts (Content-Security-Policy), and `/login` and `/logout` refuse a POST from
another origin (login CSRF)."""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response

from podium.server.http.bodies import JobIdPath
from podium.server.http.cookies import cookie_values
from podium.server.http.sessions import SessionBook
from podium.server.http.tokens import TokenBook

ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}
KEY_HEADER = b"x-podium-key"  # the page key, from the page's localStorage
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def cookie_name(listen: str | None, tls: bool) -> str:
    """The session cookie's name: one per listener port (two daemons on one host keep
    their logins apart), with the `__Host-` prefix under TLS (the browser then takes it
    only from a secure origin, for the whole host, never a domain)."""
    port = (listen or "").rpartition(":")[2] or "0"
    return f"{'__Host-' if tls else ''}podium_session_{port}"


def is_page(path: str) -> bool:
    """Whether `path` is a page a browser opens (a missing login goes to /login)."""
    return path == "/" or path.startswith("/jobs/")


def same_origin(scope: Mapping[str, Any]) -> bool:
    """Whether a browser's request comes from a page of this very origin (scheme, host
    and port): Sec-Fetch-Site says so where the browser sends it (every current one),
    else the Origin header names it. A request with neither (not from a browser)
    passes."""
    headers = dict(scope.get("headers") or ())
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").lower()
    if site:
        return site in ("same-origin", "none")
    origin = headers.get(b"origin", b"").decode("latin-1")
    if not origin:
        return True
    host = headers.get(b"host", b"").decode("latin-1")
    return bool(origin == f"{scope.get('scheme', 'http')}://{host}")


def _page(title: str, body: str, **data: str) -> str:
    attrs = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        '<link rel=stylesheet href="/static/dashboard.css">'
        '<script src="/static/dashboard.js" defer></script></head>'
        f'<body {attrs}><header><h1>Podium</h1><a href="/">cluster</a>'
        "<span class=muted>updated <span id=updated>-</span></span>"
        '<form method=post action="/logout" class=logout><button type=submit>log out'
        "</button></form></header>"
        f"<main>{body}</main></body></html>"
    )


LOGIN = (
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>Podium: log in</title>"
    '<link rel=stylesheet href="/static/dashboard.css"></head><body>'
    '<form class=login method=post action="/login"><h2>Podium</h2>'
    "<label for=token>Token (<code>podium token create --read-only</code>)</label>"
    "<input id=token name=token type=password autocomplete=off required>"
    "{error}<button type=submit>Log in</button></form></body></html>"
)


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=HEADERS)


def add_dashboard(
    app: FastAPI,
    book: TokenBook,
    sessions: SessionBook,
    locked: Callable[..., Any],
    cookie: str,
    secure: bool,
) -> None:
    """The pages, the login and logout and the assets on `app`: sessions named by the
    cookie `cookie` (`secure`: only over TLS), opened and closed under `locked` (the
    controller's lock: they write the store)."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return _html(
            _page(
                "Podium",
                "<section><h2>GPUs</h2><div id=gpus class=muted>loading</div></section>"
                "<section><h2>Queue</h2><div id=queue class=muted>loading</div></section>"
                "<section><h2>Finished in the last hour</h2><div id=finished class=muted>"
                "loading</div></section>"
                "<section><h2>Health events</h2><div id=health class=muted>loading</div>"
                "</section>",
                page="index",
            )
        )

    @app.get("/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(job_id: JobIdPath) -> HTMLResponse:
        shown = f"{job_id.job_id}" + ("" if job_id.task is None else f"_{job_id.task}")
        return _html(
            _page(
                f"Podium: job {shown}", "<section id=job class=muted>loading</section>",
                page="job", job=shown,
            )
        )  # fmt: skip

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form() -> HTMLResponse:
        return _html(LOGIN.format(error=""))

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        if not same_origin(request.scope):
            return _html(LOGIN.format(error="<p class=error>Log in from this page.</p>"), 403)
        body = (await request.body())[:4096].decode("latin-1")
        token = book.check((parse_qs(body).get("token") or [""])[0].strip())
        if token is None:
            page = LOGIN.format(error="<p class=error>That token is not valid.</p>")
            return _html(page, 401)
        session_id, key, expires = await asyncio.to_thread(locked, sessions.open, token)
        # The key goes to this page alone: its script keeps it in localStorage, then
        # opens the cluster page (a 200, not a redirect, so the key is never in a URL).
        answer = _html(_page("Podium", "<section class=muted>logging in</section>",
                             page="stored", key=key))  # fmt: skip
        answer.set_cookie(
            cookie, session_id, httponly=True, samesite="strict", path="/", secure=secure,
            max_age=max(1, int(expires - sessions.clock())),
        )  # fmt: skip
        return answer

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request) -> Response:
        if not same_origin(request.scope):
            return _html(LOGIN.format(error="<p class=error>Log out from this page.</p>"), 403)
        for session_id in cookie_values(
            request.headers.get("cookie", "").encode("latin-1"), cookie
        ):
            await asyncio.to_thread(locked, sessions.close, session_id)
        answer = _html(_page("Podium", "<section class=muted>logged out</section>",
                             page="logout"))  # fmt: skip
        answer.delete_cookie(cookie, path="/", secure=secure, httponly=True, samesite="strict")
        return answer

    @app.get("/static/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        kind = ASSETS.get(name)
        if kind is None:
            return Response(b'{"error": "no such file"}', 404, media_type="application/json")
        data = resources.files("podium.server.http").joinpath("static", name).read_bytes()
        return Response(data, media_type=kind, headers={**HEADERS, "Cache-Control": "no-cache"})


__all__ = ["ASSETS", "KEY_HEADER", "add_dashboard", "cookie_name", "is_page", "same_origin"]
