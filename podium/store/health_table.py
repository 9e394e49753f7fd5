"""The health table (what the agent fenced, per node and GPU) and the fault log."""

from __future__ import annotations

from podium.api.health import Health, Label, Remedy
from podium.store.db import Row, Store

NODE = -1  # the gpu column's value for the node itself


def _health(row: Row) -> Health:
    return Health(
        node=row["node"],
        gpu=None if row["gpu"] == NODE else row["gpu"],
        label=Label(row["label"]),
        fenced=bool(row["fenced"]),
        fault=row["fault"],
        reason=row["reason"],
        remedy=Remedy(row["remedy"]) if row["remedy"] else None,
        since=row["since"],
        boot_id=row["boot_id"],
        attempts=row["attempts"],
        deep=row["deep"],
        checked=row["checked"],
    )


class HealthTable:
    """Health records and faults, stored beside the jobs in the same database."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.version = 0  # raised by every put: a scheduling pass may see a change

    def get(self, node: str, gpu: int | None) -> Health:
        row = self.store.conn.execute(
            "SELECT * FROM health WHERE node=? AND gpu=?", (node, NODE if gpu is None else gpu)
        ).fetchone()
        return _health(row) if row is not None else Health(node, gpu)

    def all(self, node: str | None = None) -> list[Health]:
        """Every stored record (of `node` only, when given)."""
        if node is None:
            rows = self.store.conn.execute("SELECT * FROM health ORDER BY node, gpu").fetchall()
        else:
            rows = self.store.conn.execute(
                "SELECT * FROM health WHERE node=? ORDER BY gpu", (node,)
            ).fetchall()
        return [_health(r) for r in rows]

    def put(self, h: Health, now: float, event: str | None = None) -> None:
        """Store `h` (one commit, with an event naming the change when given)."""
        self.version += 1
        with self.store.transaction(durable=True) as conn:
            conn.execute(
                """INSERT OR REPLACE INTO health
                   (node, gpu, label, fenced, fault, reason, remedy, since, boot_id,
                    attempts, deep, checked) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    h.node,
                    NODE if h.gpu is None else h.gpu,
                    h.label.value,
                    int(h.fenced),
                    h.fault,
                    h.reason,
                    h.remedy.value if h.remedy else None,
                    h.since,
                    h.boot_id,
                    h.attempts,
                    h.deep,
                    h.checked,
                ),
            )
            if event is not None:
                where = "node" if h.gpu is None else f"GPU {h.gpu}"
                conn.execute(
                    "INSERT INTO events (time, node, kind, detail) VALUES (?,?,?,?)",
                    (now, h.node, "health", f"{where}: {event}"),
                )

    def record_fault(self, node: str, gpu: int | None, kind: str, reason: str, now: float) -> None:
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO faults (time, node, gpu, fault, reason) VALUES (?,?,?,?,?)",
                (now, node, NODE if gpu is None else gpu, kind, reason),
            )

    def recent_faults(self, node: str, gpu: int | None, since: float) -> int:
        row = self.store.conn.execute(
            "SELECT COUNT(*) FROM faults WHERE node=? AND gpu=? AND time>=?",
            (node, NODE if gpu is None else gpu, since),
        ).fetchone()
        return int(row[0])

    def faults(self, node: str | None = None) -> list[Row]:
        if node is None:
            return self.store.conn.execute("SELECT * FROM faults ORDER BY id").fetchall()
        return self.store.conn.execute(
            "SELECT * FROM faults WHERE node=? ORDER BY id", (node,)
        ).fetchall()

    def log(self, node: str, detail: str, now: float) -> None:
        """A health event that changes no record (a check's finding, a remedy run)."""
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO events (time, node, kind, detail) VALUES (?,?,?,?)",
                (now, node, "health", detail),
            )


__all__ = ["NODE", "HealthTable"]
