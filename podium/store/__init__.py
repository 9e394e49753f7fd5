"""The embedded database: SQLite in WAL mode holding jobs, nodes and events.

Every write that the API acknowledges is committed (synchronous=FULL) before the
call returns. One connection, used from the daemon's event-loop thread only.
"""

from podium.store.db import Store

__all__ = ["Store"]
