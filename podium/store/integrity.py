"""Is this SQLite file a Podium database this code may use?

`refusal(conn)` answers before anything is written to an existing file, and
`missing(conn)` after its migrations: a file is refused, in one line naming what is
wrong and what to do, when it

- belongs to another program (a foreign application_id, or tables but no Podium
  schema version: Podium never adds its tables to someone else's file);
- was written by a newer Podium (its schema version is above this code's: never
  downgraded);
- lacks a table or a column this version needs (a table dropped by hand, a partial
  restore).

New databases are stamped with Podium's application_id ("PDM1"); databases written by
versions before the stamp have 0 and are recognised by their schema version.
"""

from __future__ import annotations

import functools
import sqlite3

from podium.store.schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION

APPLICATION_ID = int.from_bytes(b"PDM1", "big")


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table's column names (SQLite's own tables left out)."""
    tables = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        if not r[0].startswith("sqlite_")
    ]
    return {
        t: {r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (t,))} for t in tables
    }


@functools.cache
def expected_columns() -> dict[str, frozenset[str]]:
    """The tables and columns of this version's schema, as its migrations build it."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(SCHEMA)
        for version in range(2, SCHEMA_VERSION + 1):
            conn.executescript(MIGRATIONS[version])
        return {t: frozenset(c) for t, c in _columns(conn).items()}
    finally:
        conn.close()


def refusal(conn: sqlite3.Connection, path: str) -> str | None:
    """Why the existing file at `path` (open as `conn`) must not be used or migrated
    by this version; None when it may be."""
    app = conn.execute("PRAGMA application_id").fetchone()[0]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = sorted(_columns(conn))
    if app not in (0, APPLICATION_ID) or (version == 0 and tables):
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        what = f"application id {app:#x}" if app not in (0, APPLICATION_ID) else f"tables {shown}"
        return (
            f"{path} is not a Podium database ({what}): Podium never adds its tables to "
            "another program's file; point PODIUM_HOME at a directory of Podium's own"
        )
    if version > SCHEMA_VERSION:
        return (
            f"{path} was written by a newer Podium (schema {version}; this one knows up to "
            f"{SCHEMA_VERSION}): run that version, or restore a backup made by this one"
        )
    return None


def missing(conn: sqlite3.Connection) -> str | None:
    """What of this version's schema the database lacks (a table, or a table's
    columns), in a few words; None when nothing is missing."""
    have = _columns(conn)
    for table, columns in expected_columns().items():
        if table not in have:
            return f"its table {table} is missing"
        lacking = sorted(columns - have[table])
        if lacking:
            return f"its table {table} lacks column(s) {', '.join(lacking)}"
    return None


__all__ = ["APPLICATION_ID", "expected_columns", "missing", "refusal"]
