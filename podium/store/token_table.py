"""API tokens of the HTTP listener and the dashboard's login sessions.

A token: who it acts as, read-only or not, when it expires or was revoked, the token it
was made with (`parent`), and the SHA-256 of its secret (the secret itself is shown
once, when made, and never stored). A session: the SHA-256 of its cookie and of its
page key, the token it was opened with, and when it expires. Each public method is
one transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from podium.store.database import Database

TOKEN_COLUMNS = (
    "token_id, digest, user, uid, gid, read_only, created, created_by, expires, revoked, parent"
)
SESSION_COLUMNS = "digest, key_digest, token_id, created, expires"


class Tokens(Database):
    """The tokens and sessions tables."""

    def add_token(
        self,
        token_id: str,
        digest: str,
        user: str,
        uid: int,
        gid: int,
        read_only: bool,
        now: float,
        created_by: str,
        expires: float | None,
        parent: str | None = None,
    ) -> None:
        """Record a new token (its id is unique: a clash raises sqlite3.IntegrityError)."""
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,NULL,?)",
                (
                    token_id, digest, user, uid, gid, int(read_only), now, created_by, expires,
                    parent,
                ),
            )  # fmt: skip
            self._event(
                conn, now, "token", detail=f"{token_id} for {user} by {created_by}"
                + (" (read-only)" if read_only else "")
                + (f" with token {parent}" if parent else "")
            )  # fmt: skip

    def tokens(self) -> list[sqlite3.Row]:
        """Every token, oldest first."""
        return list(self.conn.execute(f"SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created"))

    def revoke_tokens(self, token_ids: Iterable[str], now: float, by: str) -> list[str]:
        """Revoke tokens: forget them and end their sessions, with an event for each
        (a revoked token is deleted, as most services do); those that were there."""
        done: list[str] = []
        with self.transaction() as conn:
            for token_id in token_ids:
                conn.execute("DELETE FROM sessions WHERE token_id=?", (token_id,))
                cur = conn.execute("DELETE FROM tokens WHERE token_id=?", (token_id,))
                if cur.rowcount == 1:
                    done.append(token_id)
                    self._event(conn, now, "token revoked", detail=f"{token_id} by {by}")
        return done

    def drop_tokens(self, token_ids: Iterable[str]) -> None:
        """Forget tokens that can no longer be used (expired, revoked, or made with one
        that is) and their sessions; the events of their making and revoking stay."""
        ids = [(t,) for t in token_ids]
        with self.transaction() as conn:
            conn.executemany("DELETE FROM sessions WHERE token_id=?", ids)
            conn.executemany("DELETE FROM tokens WHERE token_id=?", ids)

    def add_session(
        self, digest: str, key_digest: str, token_id: str, now: float, expires: float
    ) -> None:
        """Record a new login session (digests only)."""
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES (?,?,?,?,?)",
                (digest, key_digest, token_id, now, expires),
            )

    def sessions(self) -> list[sqlite3.Row]:
        """Every session, oldest first."""
        return list(self.conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created"))

    def drop_sessions(self, digests: Iterable[str]) -> None:
        """Forget sessions (logged out, expired, or one too many for their token)."""
        with self.transaction() as conn:
            conn.executemany("DELETE FROM sessions WHERE digest=?", [(d,) for d in digests])


__all__ = ["SESSION_COLUMNS", "TOKEN_COLUMNS", "Tokens"]
