"""`podium token create|list|revoke`: the bearer tokens of the daemon's HTTP listener
(`podium up --http HOST:PORT`). A token acts with exactly its user's rights; the token
itself is printed once, alone on the last line of `create`, and never stored."""

from __future__ import annotations

import datetime as dt
import re

import click

from podium.api.timefmt import parse_duration
from podium.backends.embedded.client import Client
from podium.cli import render
from podium.errors import SpecError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def expiry_seconds(text: str) -> float:
    """Seconds from "30d", "12h", "90m", "3600s", "2w", or a Slurm duration ("7-0",
    "1:00:00"). Raises SpecError (one line) for anything else."""
    found = re.fullmatch(r"\s*(\d{1,9})\s*([smhdw])\s*", text)
    if found:
        return float(int(found[1]) * _UNITS[found[2]])
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = None
    if not seconds:
        raise SpecError(f"--expires {text!r}: give a time from now such as 30d, 12h, 90m or 7-0")
    return float(seconds)


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "-"
    return dt.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M")


@click.group()
def token() -> None:
    """Bearer tokens for the daemon's HTTP listener (podium up --http HOST:PORT)."""


@token.command("create")
@click.option("--user", default=None, help="Whose token (administrators only; default: you).")
@click.option("--read-only", is_flag=True, help="It may look, not submit or cancel.")
@click.option("--expires", default=None, help="When it stops working: 30d, 12h, 7-0 ...")
@click.option("--json", "as_json", is_flag=True)
def create(user: str | None, read_only: bool, expires: str | None, as_json: bool) -> None:
    """Make a token; the token is printed once, alone on the last line."""
    body = {
        "user": user,
        "read_only": read_only,
        "expires_s": None if expires is None else expiry_seconds(expires),
    }
    made = Client().post("/v1/tokens", body)
    if as_json:
        render.print_json(made)
        return
    rights = "read-only" if made["read_only"] else "full"
    made_with = f", made with token {made['parent']}" if made.get("parent") else ""
    click.echo(
        "for the dashboard: log in with it there; the browser keeps a read-only session, "
        "never the token (docs/dashboard.md)"
    )
    click.echo(
        f"token {made['token_id']} for {made['user']} ({rights}{made_with}), expires "
        f"{_when(made['expires'])}; shown once, keep it secret:"
    )
    click.echo(made["token"])


@token.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_tokens(as_json: bool) -> None:
    """Your tokens (an administrator's: everyone's); never the tokens themselves."""
    rows = Client().get("/v1/tokens")["tokens"]
    if as_json:
        render.print_json(rows)
        return
    render.table(
        None,
        ["ID", "USER", "RIGHTS", "CREATED", "BY", "EXPIRES", "STATE"],
        [
            [r["token_id"], r["user"], "read-only" if r["read_only"] else "full",
             _when(r["created"]), r["created_by"], _when(r["expires"]),
             "valid" if r["valid"] else ("revoked" if r["revoked"] else "expired")]
            for r in rows
        ],
    )  # fmt: skip


@token.command("revoke")
@click.argument("token_id")
def revoke(token_id: str) -> None:
    """Revoke a token by its id (podium token list); it stops working at once."""
    if not re.fullmatch(r"[0-9a-f]{12}", token_id):
        raise SpecError(f"{token_id!r} is not a token id: give the ID column of podium token list")
    done = Client().request("DELETE", f"/v1/tokens/{token_id}")
    also = (done or {}).get("revoked_with_it") or []
    click.echo(f"revoked {token_id}" + (f" and the tokens made with it: {', '.join(also)}"
                                         if also else ""))  # fmt: skip


__all__ = ["expiry_seconds", "token"]
