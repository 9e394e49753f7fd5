"""API tokens of the HTTP listener: who each acts as, read-only or not, when it
expires or was revoked, and the SHA-256 of its secret (the secret itself is shown
once, when made, and never stored). Each public method is one transaction."""

from __future__ import annotations

import sqlite3

from podium.store.database import Database

TOKEN_COLUMNS = "token_id, digest, user, uid, gid, read_only, created, created_by, expires, revoked"


class Tokens(Database):
    """The tokens table."""

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
    ) -> None:
        """Record a new token (its id is unique: a clash raises sqlite3.IntegrityError)."""
        with self.transaction() as conn:
            conn.execute(
                f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,NULL)",
                (token_id, digest, user, uid, gid, int(read_only), now, created_by, expires),
            )
            self._event(
                conn, now, "token", detail=f"{token_id} for {user} by {created_by}"
                + (" (read-only)" if read_only else "")
            )  # fmt: skip

    def tokens(self) -> list[sqlite3.Row]:
        """Every token, oldest first."""
        return list(self.conn.execute(f"SELECT {TOKEN_COLUMNS} FROM tokens ORDER BY created"))

    def revoke_token(self, token_id: str, now: float, by: str) -> bool:
        """Revoke a token; False when there is none by that id or it was revoked."""
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE tokens SET revoked=? WHERE token_id=? AND revoked IS NULL", (now, token_id)
            )
            if cur.rowcount == 1:
                self._event(conn, now, "token revoked", detail=f"{token_id} by {by}")
        return cur.rowcount == 1


__all__ = ["TOKEN_COLUMNS", "Tokens"]
