"""API tokens: made for a user (by that user, or an administrator for anyone), read-only
or not, with an optional expiry; kept hashed (SHA-256 of a 256-bit secret) in the
store and in memory, so checking one costs no database read. A token acts with exactly
its user's rights: the HTTP listener turns it into the same caller the unix socket's
peer credentials give.

A token is `pdm_<id>_<secret>`: the id (12 hex digits) names it in listings and
revocations, the secret proves it. Only `create` ever sees the secret."""

from __future__ import annotations

import hashlib
import hmac
import pwd
import re
import secrets
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from podium.api.caller import Caller
from podium.errors import NotFound, PermissionDenied, SpecError
from podium.store.db import Store

TOKEN_SHAPE = re.compile(r"pdm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
MAX_EXPIRY_S = 10 * 365 * 86400


@dataclass(frozen=True)
class Token:
    """A stored token (its secret's digest, never the secret)."""

    token_id: str
    digest: str
    user: str
    uid: int
    gid: int
    read_only: bool
    created: float
    created_by: str
    expires: float | None
    revoked: float | None

    @staticmethod
    def of_row(row: sqlite3.Row) -> Token:
        return Token(
            row["token_id"], row["digest"], row["user"], row["uid"], row["gid"],
            bool(row["read_only"]), row["created"], row["created_by"], row["expires"],
            row["revoked"],
        )  # fmt: skip

    def record(self, now: float) -> dict[str, Any]:
        """What listings show: everything but the digest, and whether it is valid now."""
        return {
            "token_id": self.token_id,
            "user": self.user,
            "read_only": self.read_only,
            "created": self.created,
            "created_by": self.created_by,
            "expires": self.expires,
            "revoked": self.revoked,
            "valid": self.valid(now),
        }

    def valid(self, now: float) -> bool:
        return self.revoked is None and (self.expires is None or now < self.expires)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenBook:
    """The daemon's tokens: made, checked, listed and revoked (callers hold the
    controller's lock for create and revoke, which write the store)."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self._by_id = {t["token_id"]: Token.of_row(t) for t in store.tokens()}

    def create(
        self, caller: Caller, user: str | None, read_only: bool, expires_s: float | None
    ) -> dict[str, Any]:
        """A new token for `user` (default: the caller), the token itself in "token".
        Raises PermissionDenied for another user's token unless the caller is an
        administrator, SpecError for an unknown user or an expiry out of bounds."""
        name = user or caller.name
        if name != caller.name and not caller.is_admin:
            raise PermissionDenied(
                f"a token for {name}: only an administrator makes tokens for other users "
                "(leave --user out for one of your own)"
            )
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise SpecError(f"no user named {name!r} on this machine") from None
        if expires_s is not None and not 0 < expires_s <= MAX_EXPIRY_S:
            raise SpecError(f"expires in {expires_s:g} s: give a time after now, at most 10 years")
        now = self.clock()
        token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        expires = None if expires_s is None else now + expires_s
        digest = _digest(secret)
        self.store.add_token(
            token_id, digest, name, entry.pw_uid, entry.pw_gid, read_only, now, caller.name,
            expires,
        )  # fmt: skip
        token = Token(token_id, digest, name, entry.pw_uid, entry.pw_gid, read_only, now,
                      caller.name, expires, None)  # fmt: skip
        self._by_id[token_id] = token
        return dict(token.record(now), token=f"pdm_{token_id}_{secret}")

    def check(self, text: str) -> Token | None:
        """The valid token `text` is, or None (malformed, unknown, wrong secret, expired
        or revoked). The secret is compared in constant time."""
        shape = TOKEN_SHAPE.fullmatch(text)
        if shape is None:
            return None
        token = self._by_id.get(shape[1])
        if token is None or not hmac.compare_digest(token.digest, _digest(shape[2])):
            return None
        return token if token.valid(self.clock()) else None

    def listing(self, caller: Caller) -> list[dict[str, Any]]:
        """The caller's tokens (an administrator's: everyone's), oldest first."""
        now = self.clock()
        return [
            t.record(now) for t in self._by_id.values() if caller.is_admin or t.uid == caller.uid
        ]

    def revoke(self, caller: Caller, token_id: str) -> dict[str, Any]:
        """Revoke one of the caller's tokens (an administrator: anyone's). Raises
        NotFound for a token that is not there, or not the caller's to see."""
        token = self._by_id.get(token_id)
        if token is None or not (caller.is_admin or token.uid == caller.uid):
            raise NotFound(f"no token {token_id!r} of yours (podium token list shows them)")
        now = self.clock()
        self.store.revoke_token(token_id, now, caller.name)
        if token.revoked is None:
            token = Token(**{**token.__dict__, "revoked": now})
            self._by_id[token_id] = token
        return token.record(now)


__all__ = ["MAX_EXPIRY_S", "TOKEN_SHAPE", "Token", "TokenBook"]
