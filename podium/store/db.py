"""Store: the jobs, nodes and events tables behind small, named operations.

Each public method is one transaction: it is either fully committed when it returns
or it raised and changed nothing. The pieces: `base` (connection, schema, the
full-disk reserve, usage, nodes, events), `jobs` (job rows), `brief` (what listings
read without the whole spec).
"""

from __future__ import annotations

from podium.store.brief import (
    BRIEF_FIELDS,
    LIST_COLUMNS,
    Row,
    brief,
    brief_from_json,
    brief_of,
    spec_of,
)
from podium.store.database import RESERVE_BYTES, Database
from podium.store.job_runs import JobRuns, RunningStart
from podium.store.job_table import JobStore
from podium.store.lost_work import JobLosses
from podium.store.metric_reads import MetricReads
from podium.store.resize_table import JobResizes
from podium.store.token_table import Tokens


class Store(JobStore, JobRuns, JobResizes, JobLosses, Tokens, MetricReads):
    """The embedded database at `path` (created on first use)."""


__all__ = [
    "BRIEF_FIELDS",
    "LIST_COLUMNS",
    "RESERVE_BYTES",
    "Database",
    "Row",
    "RunningStart",
    "Store",
    "brief",
    "brief_from_json",
    "brief_of",
    "spec_of",
]
