"""Request bounds: a body over its route's cap is refused before it is read (413), a
chunked one as soon as it passes the cap; a body that comes too slowly is 408; HEAD is
answered wherever GET is, without a body; the dashboard's login refuses a POST from
another origin."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from podium.server.http.dashboard import same_origin
from podium.server.http.http_limits import SUBMIT_CAP, RequestLimits, body_cap
from podium.server.http.http_listener import host_name, named_here


def test_each_route_has_its_cap() -> None:
    assert body_cap("POST", "/login") == 4096
    assert body_cap("POST", "/v1/jobs") == body_cap("POST", "/v1/jobs/dry-run") == SUBMIT_CAP
    assert SUBMIT_CAP >= 4 << 20  # the script's own bound fits, with room
    assert body_cap("POST", "/v1/jobs/batch") == 64 << 20
    assert body_cap("POST", "/v1/jobs/cancel") == body_cap("GET", "/v1/jobs") == 64 << 10


def _run(
    limits: RequestLimits, scope: dict[str, Any], chunks: list[bytes | None]
) -> tuple[list[dict[str, Any]], list[bytes]]:
    """Drive `limits` with a body sent as `chunks` (None: the client stalls there)."""
    sent: list[dict[str, Any]] = []
    got: list[bytes] = []
    pending = list(chunks)

    async def receive() -> dict[str, Any]:
        if not pending:
            await asyncio.sleep(3600)
        chunk = pending.pop(0)
        if chunk is None:
            await asyncio.sleep(3600)
        return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def app(s: Any, r: Any, snd: Any) -> None:
        message = await r()
        got.append(message["body"])
        await snd({"type": "http.response.start", "status": 200, "headers": [(b"x", b"1")]})
        await snd(
            {"type": "http.response.body", "body": b'{"method": "%s"}' % s["method"].encode()}
        )

    limits.app = app
    asyncio.run(limits(scope, receive, send))
    return sent, got


def _scope(method: str, path: str, length: int | None = None) -> dict[str, Any]:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    return {"type": "http", "method": method, "path": path, "headers": headers}


def _error(sent: list[dict[str, Any]]) -> tuple[int, str]:
    return sent[0]["status"], json.loads(sent[1]["body"])["error"]


def test_a_declared_length_over_the_cap_is_refused_unread() -> None:
    sent, got = _run(RequestLimits(None), _scope("POST", "/login", 500_000_000), [b"x" * 10])
    status, message = _error(sent)
    assert status == 413 and got == [] and "larger than the 4 KiB" in message
    assert (b"connection", b"close") in sent[0]["headers"]


def test_a_chunked_body_is_cut_at_the_cap() -> None:
    chunks = [b"x" * 30_000] * 5  # 150 KB in chunks, no length given
    sent, got = _run(RequestLimits(None), _scope("POST", "/v1/jobs/cancel"), chunks)
    assert _error(sent)[0] == 413 and got == []
    sent, got = _run(RequestLimits(None), _scope("POST", "/v1/jobs/cancel"), chunks[:2])
    assert sent[0]["status"] == 200 and got == [b"x" * 60_000]  # under it: passed whole


def test_a_body_that_stalls_is_408() -> None:
    limits = RequestLimits(None, idle_timeout_s=0.05)
    sent, got = _run(limits, _scope("POST", "/v1/jobs", 100), [b"x" * 10, None])
    status, message = _error(sent)
    assert status == 408 and got == [] and "came too slowly" in message


def test_head_is_get_without_a_body() -> None:
    sent, _ = _run(RequestLimits(None), _scope("HEAD", "/v1/jobs"), [b""])
    assert sent[0]["status"] == 200 and (b"x", b"1") in sent[0]["headers"]
    assert sent[1] == {"type": "http.response.body", "body": b"", "more_body": False}
    sent, _ = _run(RequestLimits(None), _scope("GET", "/v1/jobs"), [b""])
    assert sent[1]["body"] == b'{"method": "GET"}'


@pytest.mark.parametrize(
    ("headers", "ok"),
    [
        ({}, True),  # not a browser (curl)
        ({b"origin": b"http://127.0.0.1:8686"}, True),
        ({b"origin": b"null", b"sec-fetch-site": b"same-origin"}, True),
        ({b"origin": b"http://127.0.0.1:9999"}, False),  # another port of the host
        ({b"origin": b"https://127.0.0.1:8686"}, False),
        ({b"origin": b"null"}, False),
        ({b"sec-fetch-site": b"same-site"}, False),
        ({b"sec-fetch-site": b"cross-site"}, False),
    ],
)
def test_login_posts_come_from_the_same_origin(headers: dict[bytes, bytes], ok: bool) -> None:
    scope = {"scheme": "http", "headers": [(b"host", b"127.0.0.1:8686"), *headers.items()]}
    assert same_origin(scope) is ok


def test_host_names() -> None:
    assert host_name(b"Example.ORG:8686") == "example.org"
    assert host_name(b"[::1]:8686") == "::1"
    assert host_name(b"::1") == "::1"
    assert named_here(None, ()) and named_here(b"127.0.0.1", ())
    assert not named_here(b"attacker.example", ())
    assert named_here(b"box.lab:1", {"box.lab"})
