"""Tokens: made for whom the rules allow, checked in constant time against the stored
digest only, and refused once expired or revoked; the gate turns a token into a caller
and refuses what it must."""

from __future__ import annotations

import asyncio
import os
import pwd
from pathlib import Path
from typing import Any

import pytest

from podium.api.caller import Caller
from podium.cli.token_cmds import expiry_seconds
from podium.errors import NotFound, PermissionDenied, SpecError
from podium.server.http_listener import TOKEN_KEY, TokenGate
from podium.server.peer import SCOPE_KEY, PeerCred
from podium.server.tokens import TokenBook
from podium.store.db import Store

ME = pwd.getpwuid(os.getuid())
ADMIN = Caller(ME.pw_uid, ME.pw_gid, ME.pw_name, True)
USER = Caller(ME.pw_uid, ME.pw_gid, ME.pw_name, False)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def book(tmp_path: Path) -> tuple[TokenBook, Clock]:
    clock = Clock()
    return TokenBook(Store(tmp_path / "p.db"), clock), clock


def test_a_token_is_shown_once_and_kept_as_a_digest(
    book: tuple[TokenBook, Clock], tmp_path: Path
) -> None:
    tokens, _ = book
    made = tokens.create(USER, None, read_only=True, expires_s=None)
    assert made["user"] == ME.pw_name and made["read_only"] and made["valid"]
    found = tokens.check(made["token"])
    assert found is not None and found.uid == ME.pw_uid and found.read_only
    again = TokenBook(Store(tmp_path / "p.db"), Clock())  # a restarted daemon
    assert again.check(made["token"]) is not None
    assert "token" not in again.listing(USER)[0]
    secret = made["token"].split("_", 2)[2].encode()  # the secret may hold "_" itself
    assert all(secret not in p.read_bytes() for p in tmp_path.iterdir() if p.is_file())


def test_wrong_malformed_expired_and_revoked_tokens_are_none(
    book: tuple[TokenBook, Clock],
) -> None:
    tokens, clock = book
    made = tokens.create(USER, None, read_only=False, expires_s=60)
    token_id = made["token_id"]
    for text in ("", "pdm_", made["token"] + "x", f"pdm_{token_id}_" + "A" * 43, "Bearer x"):
        assert tokens.check(text) is None, text
    clock.now += 61
    assert tokens.check(made["token"]) is None
    clock.now -= 61
    assert tokens.check(made["token"]) is not None
    assert tokens.revoke(USER, token_id)["revoked"] == clock.now
    assert tokens.check(made["token"]) is None


def test_who_may_make_and_revoke_which_tokens(book: tuple[TokenBook, Clock]) -> None:
    tokens, _ = book
    other = Caller(ME.pw_uid + 4242, ME.pw_gid, "someone-else", False)
    with pytest.raises(PermissionDenied, match="only an administrator"):
        tokens.create(other, ME.pw_name, read_only=False, expires_s=None)
    with pytest.raises(SpecError, match="no user named"):
        tokens.create(ADMIN, "no-such-user-here", read_only=False, expires_s=None)
    with pytest.raises(SpecError, match="at most 10 years"):
        tokens.create(USER, None, read_only=False, expires_s=1e12)
    mine = tokens.create(USER, None, read_only=False, expires_s=None)
    assert tokens.listing(other) == []
    with pytest.raises(NotFound):
        tokens.revoke(other, mine["token_id"])
    assert tokens.revoke(ADMIN, mine["token_id"])["valid"] is False


def _call(gate: TokenGate, scope: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    sent: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []

    async def app(s: Any, receive: Any, send: Any) -> None:
        seen.append(s)
        await send({"type": "http.response.start", "status": 200, "headers": []})

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    gate.app = app
    asyncio.run(gate(scope, None, send))
    return sent[0]["status"], (seen[0] if seen else None)


def test_the_gate(book: tuple[TokenBook, Clock]) -> None:
    tokens, _ = book
    gate = TokenGate(None, tokens, metrics_open=True)
    full = tokens.create(USER, None, read_only=False, expires_s=None)
    looker = tokens.create(USER, None, read_only=True, expires_s=None)

    def scope(method: str, path: str, token: str | None, peer: Any = None) -> dict[str, Any]:
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        return {"type": "http", "method": method, "path": path, "headers": headers,
                SCOPE_KEY: peer}  # fmt: skip

    assert _call(gate, scope("GET", "/v1/jobs", None))[0] == 401
    assert _call(gate, scope("GET", "/v1/jobs", "pdm_nope"))[0] == 401
    status, seen = _call(gate, scope("POST", "/v1/jobs", full["token"]))
    assert status == 200 and seen is not None
    assert seen[SCOPE_KEY] == PeerCred(0, ME.pw_uid, ME.pw_gid)
    assert seen[TOKEN_KEY] == full["token_id"]
    assert _call(gate, scope("POST", "/v1/jobs", looker["token"]))[0] == 403
    assert _call(gate, scope("GET", "/v1/jobs", looker["token"]))[0] == 200
    assert _call(gate, scope("GET", "/metrics", None))[0] == 200
    assert _call(gate, scope("GET", "/openapi.json", None))[0] == 200
    # the unix socket's peer passes untouched; a TCP request cannot claim one
    peer = PeerCred(123, 0, 0)
    assert _call(gate, scope("POST", "/v1/jobs", None, peer))[1][SCOPE_KEY] == peer  # type: ignore[index]
    closed = TokenGate(None, tokens, metrics_open=False)
    assert _call(closed, scope("GET", "/metrics", None))[0] == 401


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("7-0", 7 * 86400)]
)
def test_expiry_forms(text: str, seconds: int) -> None:
    assert expiry_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1d", "0", "1y"])
def test_bad_expiries_are_one_line(text: str) -> None:
    with pytest.raises(SpecError, match="give a time from now"):
        expiry_seconds(text)
