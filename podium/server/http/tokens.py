"""API tokens: made for a user (by that user, or an administrator for anyone), read-only
or not, with an optional expiry; kept hashed (SHA-256 of a 256-bit secret) in the
store and in memory, so checking one costs no database read. A token acts with exactly
its user's rights: the HTTP listener turns it into the same caller the unix socket's
peer credentials give.

A token made over HTTP with another token is that token's child: it expires no later
than its parent and is revoked with it (and with its parent's parent), so a token that
leaked can be ended with everything made from it. A user holds at most
`max_per_user` tokens at once, counting every one stored. A revoked token is
forgotten at once, with every token made from it; an expired one is listed (and
counted) as such for ENDED_KEPT_S, then forgotten (when the daemon starts or a token
is made). So tokens made to expire at once neither pile up nor escape the count; the
events of making and revoking tokens stay.

A token is `pdm_<id>_<secret>`: the id (12 hex digits) names it in listings and
revocations, the secret proves it. Only `create` ever sees the secret."""

from __future__ import annotations

import hashlib
import hmac
import pwd
import re
import secrets
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from podium.api.caller import Caller
from podium.errors import NotFound, PermissionDenied, SpecError
from podium.store.db import Store

TOKEN_SHAPE = re.compile(r"pdm_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")
MAX_EXPIRY_S = 10 * 365 * 86400
MAX_PER_USER = 100  # tokens one user may hold at once (http.max_tokens_per_user)
ENDED_KEPT_S = 600.0  # an ended token is listed (and counted) this long, then forgotten


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
    parent: str | None = None

    @staticmethod
    def of_row(row: sqlite3.Row) -> Token:
        return Token(
            row["token_id"], row["digest"], row["user"], row["uid"], row["gid"],
            bool(row["read_only"]), row["created"], row["created_by"], row["expires"],
            row["revoked"], row["parent"],
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
            "parent": self.parent,
            "valid": self.valid(now),
        }

    def valid(self, now: float) -> bool:
        """Whether it was usable at `now` (before its revocation and its expiry)."""
        return (self.revoked is None or now < self.revoked) and (
            self.expires is None or now < self.expires
        )


def digest_of(secret: str) -> str:
    """The SHA-256 of a secret, as stored."""
    return hashlib.sha256(secret.encode()).hexdigest()


class TokenBook:
    """The daemon's tokens: made, checked, listed and revoked. Thread-safe: its own
    lock guards the tokens in memory (checks and listings run on any thread);
    callers hold the controller's lock for create and revoke, which write the store."""

    def __init__(
        self, store: Store, clock: Callable[[], float], max_per_user: int = MAX_PER_USER
    ) -> None:
        self.store = store
        self.clock = clock
        self.max_per_user = max_per_user
        self._lock = threading.Lock()
        self._by_id = {t["token_id"]: Token.of_row(t) for t in store.tokens()}
        self.revoked_hooks: list[Callable[[list[str]], None]] = []  # told what was revoked
        with self._lock:
            self._purge()

    def create(
        self,
        caller: Caller,
        user: str | None,
        read_only: bool,
        expires_s: float | None,
        parent: str | None = None,
    ) -> dict[str, Any]:
        """A new token for `user` (default: the caller), the token itself in "token".
        `parent`: the token the request came with (over HTTP), which the new one may
        not outlive. Raises PermissionDenied for another user's token unless the caller
        is an administrator, or past the caller's count of valid tokens; SpecError for
        an unknown user or an expiry out of bounds or past the parent's."""
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
        expires = None if expires_s is None else now + expires_s
        with self._lock:
            if parent is not None:
                expires = self._within_parent(parent, expires, now)
            gone = self._purge()
            held = sum(1 for t in self._by_id.values() if t.uid == entry.pw_uid)
            if held >= self.max_per_user:
                raise PermissionDenied(
                    f"{name} holds {held} tokens, the most one user may "
                    f"(http.max_tokens_per_user): revoke some first (podium token list)"
                )
            token_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
            token = Token(
                token_id, digest_of(secret), name, entry.pw_uid, entry.pw_gid, read_only, now,
                caller.name, expires, None, parent,
            )  # fmt: skip
            self.store.add_token(
                token_id, token.digest, name, entry.pw_uid, entry.pw_gid, read_only, now,
                caller.name, expires, parent,
            )  # fmt: skip
            self._by_id[token_id] = token
        for hook in self.revoked_hooks if gone else ():
            hook(gone)
        return dict(token.record(now), token=f"pdm_{token_id}_{secret}")

    def _purge(self) -> list[str]:
        """Forget the tokens that ended ENDED_KEPT_S ago or more (the lock held); their
        ids."""
        before = self.clock() - ENDED_KEPT_S
        gone = [t for t in self._by_id if not self.valid(t, at=before)]
        if gone:
            self.store.drop_tokens(gone)
            for token_id in gone:
                del self._by_id[token_id]
        return gone

    def _within_parent(self, parent: str, expires: float | None, now: float) -> float | None:
        """The new token's expiry under `parent` (the lock held): the parent's when none
        was asked; SpecError when the one asked comes after the parent's."""
        limit = self._by_id[parent].expires
        if limit is None or (expires is not None and expires <= limit):
            return expires
        if expires is None:
            return limit
        raise SpecError(
            f"token {parent}, which makes this one, expires in {limit - now:.0f} s: a token "
            f"made with it expires no later (give --expires {max(1, int(limit - now))}s or "
            "less: a bare number is minutes, as Slurm reads it)"
        )

    def check(self, text: str) -> Token | None:
        """The valid token `text` is, or None (malformed, unknown, wrong secret, expired
        or revoked, or made with a token that is no longer valid). The secret is
        compared in constant time."""
        shape = TOKEN_SHAPE.fullmatch(text)
        if shape is None:
            return None
        token = self._by_id.get(shape[1])
        if token is None or not hmac.compare_digest(token.digest, digest_of(shape[2])):
            return None
        return token if self.valid(token.token_id) else None

    def valid(self, token_id: str, at: float | None = None) -> bool:
        """Whether token `token_id` may be used now (or at time `at`): it and every
        token it was made with are neither expired nor revoked."""
        now = self.clock() if at is None else at
        seen: set[str] = set()
        token = self._by_id.get(token_id)
        while token is not None and token.token_id not in seen:
            if not token.valid(now):
                return False
            seen.add(token.token_id)
            if token.parent is None:
                return True
            token = self._by_id.get(token.parent)
        return False  # a parent that is not there (or a loop no create can make)

    def get(self, token_id: str) -> Token | None:
        """Token `token_id`, valid or not (None: no such token)."""
        return self._by_id.get(token_id)

    def listing(self, caller: Caller) -> list[dict[str, Any]]:
        """The caller's tokens (an administrator's: everyone's), oldest first."""
        now = self.clock()
        with self._lock:
            tokens = list(self._by_id.values())
        return [
            dict(t.record(now), valid=t.valid(now) and self.valid(t.token_id))
            for t in tokens
            if caller.is_admin or t.uid == caller.uid
        ]

    def revoke(self, caller: Caller, token_id: str) -> dict[str, Any]:
        """Revoke one of the caller's tokens (an administrator: anyone's), every token
        made with it, and their sessions: all are forgotten. Raises NotFound for a
        token that is not there (or no longer), or not the caller's to see."""
        now = self.clock()
        with self._lock:
            token = self._by_id.get(token_id)
            if token is None or not (caller.is_admin or token.uid == caller.uid):
                raise NotFound(f"no token {token_id!r} of yours (podium token list shows them)")
            family = self._descendants(token_id)
            self.store.revoke_tokens(family, now, caller.name)
            record = replace(token, revoked=now).record(now)
            for member in family:
                del self._by_id[member]
        for hook in self.revoked_hooks:
            hook(family)
        return dict(record, revoked_with_it=[t for t in family if t != token_id])

    def _descendants(self, token_id: str) -> list[str]:
        """`token_id` and every token made from it, at any depth (the lock held)."""
        children: dict[str, list[str]] = {}
        for t in self._by_id.values():
            if t.parent is not None:
                children.setdefault(t.parent, []).append(t.token_id)
        found, todo = [token_id], [token_id]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.append(child)
                    todo.append(child)
        return found


__all__ = [
    "ENDED_KEPT_S",
    "MAX_EXPIRY_S",
    "MAX_PER_USER",
    "TOKEN_SHAPE",
    "Token",
    "TokenBook",
    "digest_of",
]
