"""The MIG layouts `podium mig apply` was asked for and made, per node and GPU (schema 9).

A layout is a list of profiles (["3g.40gb", "1g.10gb"]); [] is a whole GPU.
"""

from __future__ import annotations

from podium.store.db import Store


def _text(layout: list[str]) -> str:
    return "+".join(layout)


def _layout(text: str) -> list[str]:
    return text.split("+") if text else []


class MigLayouts:
    """Planned and applied layouts, beside the jobs in the same database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def plan(self, node: str, gpu: int, layout: list[str], by: str, now: float) -> None:
        """Record that `gpu` is to be split as `layout` once it is drained."""
        with self.store.transaction(durable=True) as db:
            db.execute(
                "INSERT INTO mig_layouts (node, gpu, planned, by_user, changed) "
                "VALUES (?,?,?,?,?) ON CONFLICT (node, gpu) DO UPDATE SET "
                "planned = excluded.planned, by_user = excluded.by_user, "
                "changed = excluded.changed",
                (node, gpu, _text(layout), by, now),
            )

    def planned(self, node: str, gpu: int) -> list[str] | None:
        """The layout `gpu` waits to be split in; None when none is planned."""
        row = self.store.conn.execute(
            "SELECT planned FROM mig_layouts WHERE node = ? AND gpu = ?", (node, gpu)
        ).fetchone()
        return None if row is None or row["planned"] is None else _layout(row["planned"])

    def applied(self, node: str, gpu: int, layout: list[str], now: float) -> None:
        """Record that `gpu` is now split as `layout` (the plan is done)."""
        with self.store.transaction(durable=True) as db:
            db.execute(
                "UPDATE mig_layouts SET applied = ?, planned = NULL, changed = ? "
                "WHERE node = ? AND gpu = ?",
                (_text(layout), now, node, gpu),
            )

    def drop_plan(self, node: str, gpu: int) -> None:
        """Forget `gpu`'s plan (an admin resumed the GPU as it is)."""
        with self.store.transaction() as db:
            db.execute(
                "UPDATE mig_layouts SET planned = NULL WHERE node = ? AND gpu = ?", (node, gpu)
            )

    def all_applied(self, node: str) -> dict[int, list[str]]:
        """Each GPU's last applied layout on `node`."""
        rows = self.store.conn.execute(
            "SELECT gpu, applied FROM mig_layouts WHERE node = ? AND applied IS NOT NULL",
            (node,),
        ).fetchall()
        return {r["gpu"]: _layout(r["applied"]) for r in rows}


__all__ = ["MigLayouts"]
