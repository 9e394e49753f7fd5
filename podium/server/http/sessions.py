"""The dashboard's login sessions: what a browser holds instead of a token.

Logging in with a token opens a session of two random secrets:

- the **session id**, in an HttpOnly, SameSite=Strict cookie (`Secure` under TLS). A
  browser sends a cookie to every port of its host (RFC 6265 §8.5), so any other
  server on the same machine (a user's Jupyter, TensorBoard) may receive it: alone it
  opens the dashboard's empty pages and nothing else;
- the **page key**, handed once to the page that logged in and kept in its
  localStorage, which is its origin's alone (scheme, host and port): the page sends it
  in an `X-Podium-Key` header with each API read. A page of another port cannot read
  it, and a cross-site request cannot send that header without a CORS preflight the
  daemon never grants.

A session reads and never changes anything, whatever its token may do; it is never
accepted as a bearer token; it expires after `ttl_s` (and no later than its token), and
ends when its token (or one its token was made with) is revoked or expires, or at
logout. Only SHA-256 digests of the two secrets are kept (memory and the store, so a
restart keeps people logged in). A token opens at most MAX_PER_TOKEN sessions at once
(the oldest ends). Thread-safe; `open` and `close` write the store, so their callers
hold the controller's lock."""

from __future__ import annotations

import hmac
import re
import secrets
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from podium.server.http.tokens import Token, TokenBook, digest_of
from podium.store.db import Store

SESSION_SHAPE = re.compile(r"pds_[A-Za-z0-9_-]{43}")
KEY_SHAPE = re.compile(r"pdk_[A-Za-z0-9_-]{43}")
TTL_S = 12 * 3600.0  # http.session_hours
MAX_PER_TOKEN = 20


@dataclass(frozen=True)
class Session:
    """A stored session: digests of its id and key, its token, its times."""

    digest: str
    key_digest: str
    token_id: str
    created: float
    expires: float


class SessionBook:
    """Open, check and close the dashboard's sessions (see the module docstring)."""

    def __init__(self, store: Store, tokens: TokenBook, ttl_s: float = TTL_S) -> None:
        self.store = store
        self.tokens = tokens
        self.clock: Callable[[], float] = tokens.clock
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._by_digest = {
            r["digest"]: Session(
                r["digest"], r["key_digest"], r["token_id"], r["created"], r["expires"]
            )
            for r in store.sessions()
        }
        tokens.revoked_hooks.append(self.ended)

    def open(self, token: Token) -> tuple[str, str, float]:
        """A new session for `token` (checked valid by the caller): its id (the
        cookie), its page key, and when it expires."""
        now = self.clock()
        expires = now + self.ttl_s
        if token.expires is not None:
            expires = min(expires, token.expires)
        session_id = "pds_" + secrets.token_urlsafe(32)
        key = "pdk_" + secrets.token_urlsafe(32)
        session = Session(digest_of(session_id), digest_of(key), token.token_id, now, expires)
        with self._lock:
            gone = [s.digest for s in self._by_digest.values() if s.expires <= now]
            mine = sorted(
                (s for s in self._by_digest.values()
                 if s.token_id == token.token_id and s.expires > now),
                key=lambda s: s.created,
            )  # fmt: skip
            gone += [s.digest for s in mine[: max(0, len(mine) - MAX_PER_TOKEN + 1)]]
            self._forget(gone)
            self.store.add_session(session.digest, session.key_digest, token.token_id, now, expires)
            self._by_digest[session.digest] = session
        return session_id, key, expires

    def check(self, session_id: str, key: str | None) -> Token | None:
        """The token a valid session acts for, or None: malformed, unknown, expired,
        its token no longer valid, or (with `key` given) the wrong page key. `key`
        None checks the cookie alone (pages, which carry no data)."""
        if not SESSION_SHAPE.fullmatch(session_id):
            return None
        session = self._by_digest.get(digest_of(session_id))
        if session is None or self.clock() >= session.expires:
            return None
        if key is not None and not (
            KEY_SHAPE.fullmatch(key) and hmac.compare_digest(session.key_digest, digest_of(key))
        ):
            return None
        if not self.tokens.valid(session.token_id):
            return None
        return self.tokens.get(session.token_id)

    def close(self, session_id: str) -> None:
        """End a session (logout); nothing for one that is not there."""
        if SESSION_SHAPE.fullmatch(session_id):
            with self._lock:
                self._forget([digest_of(session_id)])

    def ended(self, token_ids: Iterable[str]) -> None:
        """Forget the sessions of revoked tokens (the store dropped them already)."""
        revoked = set(token_ids)
        with self._lock:
            for digest in [d for d, s in self._by_digest.items() if s.token_id in revoked]:
                del self._by_digest[digest]

    def _forget(self, digests: list[str]) -> None:
        if digests:
            self.store.drop_sessions(digests)
            for digest in digests:
                self._by_digest.pop(digest, None)


__all__ = ["KEY_SHAPE", "SESSION_SHAPE", "TTL_S", "Session", "SessionBook"]
