"""The web dashboard on the HTTP listener: read-only pages served by the daemon itself
(`static/dashboard.js` and `.css`, no file from the internet), behind the same tokens
as the API. A person logs in once with a token (`podium token create --read-only`),
kept in a cookie the page's script cannot read (HttpOnly, SameSite=Strict); the script
then polls the JSON API every 2 s and builds the page with text nodes only.

Pages: `/` (every GPU with its job, user, health and utilisation; the queue with each
pending job's reason, blockers in plain words and expected start; the node's health
events, newest first) and `/jobs/{id}` (a job's facts, goodput, blockers, timeline and
the end of its output, read as its user: its details are its user's and the
administrators', as `podium show` decides)."""

from __future__ import annotations

import html
from importlib import resources
from urllib.parse import parse_qs

from fastapi import FastAPI, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from podium.jobspec.values import MAX_JOB_ID
from podium.server.tokens import TokenBook

COOKIE = "podium_token"
ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}


def is_page(path: str) -> bool:
    """Whether `path` is a page a browser opens (a missing login goes to /login)."""
    return path == "/" or path.startswith("/jobs/")


def _page(title: str, body: str, **data: str) -> str:
    attrs = " ".join(f'data-{k}="{html.escape(v)}"' for k, v in data.items())
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        '<link rel=stylesheet href="/static/dashboard.css">'
        '<script src="/static/dashboard.js" defer></script></head>'
        f'<body {attrs}><header><h1>Podium</h1><a href="/">cluster</a>'
        "<span class=muted>updated <span id=updated>-</span></span>"
        '<a href="/logout">log out</a></header>'
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


def add_dashboard(app: FastAPI, book: TokenBook) -> None:
    """The pages, the login and the assets on `app`."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> str:
        return _page(
            "Podium",
            "<section><h2>GPUs</h2><div id=gpus class=muted>loading</div></section>"
            "<section><h2>Queue</h2><div id=queue class=muted>loading</div></section>"
            "<section><h2>Health events</h2><div id=health class=muted>loading</div></section>",
            page="index",
        )

    @app.get("/jobs/{job_id}", response_class=HTMLResponse, include_in_schema=False)
    def job_page(job_id: int = Path(ge=1, le=MAX_JOB_ID)) -> str:
        return _page(
            f"Podium: job {job_id}", "<section id=job class=muted>loading</section>",
            page="job", job=str(job_id),
        )  # fmt: skip

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form() -> str:
        return LOGIN.format(error="")

    @app.post("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        body = (await request.body())[:4096].decode("latin-1")
        token = (parse_qs(body).get("token") or [""])[0].strip()
        if book.check(token) is None:
            page = LOGIN.format(error="<p class=error>That token is not valid.</p>")
            return HTMLResponse(page, status_code=401)
        answer = RedirectResponse("/", status_code=303)
        answer.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return answer

    @app.get("/logout", include_in_schema=False)
    def logout() -> Response:
        answer = RedirectResponse("/login", status_code=303)
        answer.delete_cookie(COOKIE, path="/")
        return answer

    @app.get("/static/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        kind = ASSETS.get(name)
        if kind is None:
            return Response(b'{"error": "no such file"}', 404, media_type="application/json")
        data = resources.files("podium.server").joinpath("static", name).read_bytes()
        return Response(data, media_type=kind, headers={"Cache-Control": "no-cache"})


__all__ = ["COOKIE", "add_dashboard", "is_page"]
