"""Tokens: made for whom the rules allow, checked in constant time against the stored
digest only, and refused once expired or revoked; a token made with a token never
outlives it; a user holds a bounded number; the gate turns a token or a dashboard
session into a caller and refuses what it must."""

from __future__ import annotations

import asyncio
import os
import pwd
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from podium.api.caller import Caller
from podium.cli.token_cmds import expiry_seconds
from podium.errors import NotFound, PermissionDenied, SpecError
from podium.server.http.http_listener import SESSION_KEY, TOKEN_KEY, TokenGate
from podium.server.http.peer import SCOPE_KEY, PeerCred
from podium.server.http.sessions import SessionBook
from podium.server.http.tokens import ENDED_KEPT_S, TokenBook
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


COOKIE = "podium_session_8686"


def _scope(
    method: str,
    path: str,
    token: str | None = None,
    peer: Any = None,
    cookie: str | None = None,
    key: str | None = None,
    host: bytes = b"127.0.0.1:8686",
) -> dict[str, Any]:
    headers = [(b"host", host)]
    if token:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    if cookie:
        headers.append((b"cookie", f"other=1; {COOKIE}={cookie}".encode()))
    if key:
        headers.append((b"x-podium-key", key.encode()))
    return {"type": "http", "method": method, "path": path, "headers": headers, SCOPE_KEY: peer}


def test_the_gate(book: tuple[TokenBook, Clock]) -> None:
    tokens, _ = book
    sessions = SessionBook(tokens.store, tokens)
    gate = TokenGate(None, tokens, sessions, COOKIE, metrics_open=True)
    full = tokens.create(USER, None, read_only=False, expires_s=None)
    looker = tokens.create(USER, None, read_only=True, expires_s=None)

    assert _call(gate, _scope("GET", "/v1/jobs"))[0] == 401
    assert _call(gate, _scope("GET", "/v1/jobs", "pdm_nope"))[0] == 401
    status, seen = _call(gate, _scope("POST", "/v1/jobs", full["token"]))
    assert status == 200 and seen is not None
    assert seen[SCOPE_KEY] == PeerCred(0, ME.pw_uid, ME.pw_gid)
    assert seen[TOKEN_KEY] == full["token_id"]
    assert _call(gate, _scope("POST", "/v1/jobs", looker["token"]))[0] == 403
    assert _call(gate, _scope("GET", "/v1/jobs", looker["token"]))[0] == 200
    assert _call(gate, _scope("GET", "/metrics"))[0] == 200
    assert _call(gate, _scope("GET", "/openapi.json"))[0] == 200
    # the unix socket's peer passes untouched; a TCP request cannot claim one
    peer = PeerCred(123, 0, 0)
    assert _call(gate, _scope("POST", "/v1/jobs", None, peer))[1][SCOPE_KEY] == peer  # type: ignore[index]
    closed = TokenGate(None, tokens, sessions, COOKIE, metrics_open=False)
    assert _call(closed, _scope("GET", "/metrics"))[0] == 401


def test_the_gate_checks_the_host_before_anything(book: tuple[TokenBook, Clock]) -> None:
    """DNS rebinding: a Host that is a DNS name not configured is refused, even for the
    routes that need no token; addresses and localhost pass, and configured names."""
    tokens, _ = book
    gate = TokenGate(None, tokens, SessionBook(tokens.store, tokens), COOKIE, True, ["gpu.lab"])
    for host in (b"evil.example", b"evil.example:8686", b"127.0.0.1.nip.io:8686", b"lab"):
        assert _call(gate, _scope("GET", "/metrics", host=host))[0] == 400, host
    for host in (b"127.0.0.1:8686", b"[::1]:8686", b"localhost", b"LOCALHOST:1", b"10.0.0.7",
                 b"gpu.lab:8686", b"GPU.LAB"):  # fmt: skip
        assert _call(gate, _scope("GET", "/metrics", host=host))[0] == 200, host


def test_a_dashboard_session_only_reads_and_only_with_its_page_key(
    book: tuple[TokenBook, Clock],
) -> None:
    """Issue 43: the cookie is a session id, never a token; with its page key it reads as
    its token's user, never changes anything (even for a full token), and dies with
    its token; without the key it opens pages only."""
    tokens, clock = book
    sessions = SessionBook(tokens.store, tokens)
    gate = TokenGate(None, tokens, sessions, COOKIE, metrics_open=True)
    full = tokens.create(USER, None, read_only=False, expires_s=None)
    token = tokens.check(full["token"])
    assert token is not None
    cookie, key, _ = sessions.open(token)
    assert "pdm_" not in cookie + key and full["token"].split("_", 2)[2] not in cookie + key
    status, seen = _call(gate, _scope("GET", "/v1/jobs", cookie=cookie, key=key))
    assert status == 200 and seen is not None and seen[SESSION_KEY] is True
    assert seen[SCOPE_KEY] == PeerCred(0, ME.pw_uid, ME.pw_gid) and TOKEN_KEY not in seen
    assert _call(gate, _scope("POST", "/v1/jobs", cookie=cookie, key=key))[0] == 403
    assert _call(gate, _scope("GET", "/v1/jobs", cookie=cookie))[0] == 401  # no key
    assert _call(gate, _scope("GET", "/v1/jobs", cookie=cookie, key="pdk_" + "A" * 43))[0] == 401
    assert _call(gate, _scope("GET", "/", cookie=cookie))[0] == 200  # a page: no data
    assert _call(gate, _scope("GET", "/v1/jobs", token=cookie))[0] == 401  # never a bearer
    assert _call(gate, _scope("GET", "/v1/jobs", token=key))[0] == 401
    tokens.revoke(USER, full["token_id"])
    assert _call(gate, _scope("GET", "/v1/jobs", cookie=cookie, key=key))[0] == 401
    assert _call(gate, _scope("GET", "/", cookie=cookie))[0] == 303  # to the login page
    clock.now += 1


def test_sessions_expire_end_at_logout_survive_a_restart_and_are_kept_as_digests(
    book: tuple[TokenBook, Clock], tmp_path: Path
) -> None:
    tokens, clock = book
    sessions = SessionBook(tokens.store, tokens, ttl_s=100)
    short = tokens.create(USER, None, read_only=True, expires_s=50)
    token = tokens.check(short["token"])
    assert token is not None
    cookie, key, expires = sessions.open(token)
    assert expires == clock.now + 50  # no later than its token
    again = SessionBook(tokens.store, TokenBook(tokens.store, clock))  # a restarted daemon
    assert again.check(cookie, key) is not None
    assert all(
        cookie.encode() not in p.read_bytes() and key.encode() not in p.read_bytes()
        for p in tmp_path.iterdir()
        if p.is_file()
    )
    clock.now += 51
    assert sessions.check(cookie, key) is None
    long = tokens.create(USER, None, read_only=True, expires_s=None)
    token = tokens.check(long["token"])
    assert token is not None
    cookie, key, expires = sessions.open(token)
    assert expires == clock.now + 100
    sessions.close(cookie)
    assert sessions.check(cookie, key) is None
    opened = [sessions.open(token) for _ in range(25)]  # at most 20 at once per token
    assert [sessions.check(c, k) is not None for c, k, _ in opened] == [False] * 5 + [True] * 20


def test_a_token_made_with_a_token_never_outlives_it(book: tuple[TokenBook, Clock]) -> None:
    """Issue 43: a 3-second token made one with no expiry that outlived it; now the child
    takes its parent's expiry, may not ask for a later one, and is revoked with it
    (and with its grandparent)."""
    tokens, clock = book
    parent = tokens.create(USER, None, read_only=False, expires_s=3)
    child = tokens.create(USER, None, False, None, parent=parent["token_id"])
    assert child["expires"] == parent["expires"]
    with pytest.raises(SpecError, match="expires no later"):
        tokens.create(USER, None, False, 3600, parent=parent["token_id"])
    sooner = tokens.create(USER, None, False, 1, parent=parent["token_id"])
    assert sooner["expires"] == clock.now + 1
    clock.now += 4
    assert tokens.check(child["token"]) is None
    root = tokens.create(USER, None, read_only=False, expires_s=None)
    kid = tokens.create(USER, None, False, None, parent=root["token_id"])
    grandkid = tokens.create(USER, None, False, 60, parent=kid["token_id"])
    assert kid["expires"] is None and tokens.check(grandkid["token"]) is not None
    revoked = tokens.revoke(USER, root["token_id"])
    assert sorted(revoked["revoked_with_it"]) == sorted([kid["token_id"], grandkid["token_id"]])
    assert tokens.check(kid["token"]) is None and tokens.check(grandkid["token"]) is None
    again = TokenBook(tokens.store, clock)  # and so after a restart
    assert again.check(grandkid["token"]) is None


def test_a_user_holds_a_bounded_number_of_tokens(tmp_path: Path) -> None:
    clock = Clock()
    tokens = TokenBook(Store(tmp_path / "p.db"), clock, max_per_user=3)
    made = [tokens.create(USER, None, read_only=True, expires_s=10) for _ in range(3)]
    with pytest.raises(PermissionDenied, match="holds 3 tokens"):
        tokens.create(USER, None, read_only=True, expires_s=None)
    tokens.revoke(USER, made[0]["token_id"])
    clock.now += ENDED_KEPT_S
    tokens.create(USER, None, read_only=True, expires_s=None)  # room again
    clock.now += 11  # the other two expired long enough ago: they no longer count
    tokens.create(USER, None, read_only=True, expires_s=None)
    tokens.create(USER, None, read_only=True, expires_s=None)


def test_short_lived_tokens_count_and_are_forgotten_once_they_expire(tmp_path: Path) -> None:
    """Issue 60, item 4: only valid tokens counted, so tokens made to expire at once
    were unlimited and kept for ever (7,355 in 90 s against a cap of 20). Now every
    stored token counts (an ended one for ENDED_KEPT_S, listed as such), and then it
    is forgotten."""
    clock = Clock()
    store = Store(tmp_path / "p.db")
    tokens = TokenBook(store, clock, max_per_user=20)
    for _ in range(20):
        tokens.create(USER, None, read_only=True, expires_s=0.001)
    clock.now += 1  # all expired, and listed so for a while
    with pytest.raises(PermissionDenied, match="holds 20 tokens"):
        tokens.create(USER, None, read_only=True, expires_s=0.001)
    assert [r["valid"] for r in tokens.listing(USER)] == [False] * 20
    for _ in range(10_000):
        clock.now += ENDED_KEPT_S + 0.01  # each ended long enough before the next
        tokens.create(USER, None, read_only=True, expires_s=0.001)
    assert len(store.tokens()) == 1 and len(tokens.listing(ADMIN)) == 1
    parent = tokens.create(USER, None, read_only=False, expires_s=None)
    child = tokens.create(USER, None, read_only=True, expires_s=None, parent=parent["token_id"])
    tokens.revoke(USER, parent["token_id"])
    clock.now += ENDED_KEPT_S + 1
    tokens.create(USER, None, read_only=True, expires_s=None)  # forgets the revoked family
    kept = {r["token_id"] for r in store.tokens()}
    assert parent["token_id"] not in kept and child["token_id"] not in kept and len(kept) == 1
    assert TokenBook(store, clock).check(child["token"]) is None  # and after a restart


def test_listing_while_tokens_are_made_never_fails(book: tuple[TokenBook, Clock]) -> None:
    """Issue 43: GET /v1/tokens answered 500 (dictionary changed size during iteration)
    while another thread made tokens."""
    tokens, _ = book
    tokens.max_per_user = 10_000
    failures: list[BaseException] = []
    stop = threading.Event()

    def make() -> None:
        while not stop.is_set():
            tokens.create(USER, None, read_only=True, expires_s=None)

    maker = threading.Thread(target=make)
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can
    maker.start()
    try:
        while len(tokens.listing(ADMIN)) < 400 and not failures:
            try:
                tokens.listing(USER)
            except RuntimeError as exc:
                failures.append(exc)
    finally:
        stop.set()
        maker.join()
        sys.setswitchinterval(switch)
    assert failures == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("7-0", 7 * 86400)]
)
def test_expiry_forms(text: str, seconds: int) -> None:
    assert expiry_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-1d", "0", "1y"])
def test_bad_expiries_are_one_line(text: str) -> None:
    with pytest.raises(SpecError, match="give a time from now"):
        expiry_seconds(text)
