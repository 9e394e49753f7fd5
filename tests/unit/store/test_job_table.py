"""The job table's WHERE builder: one JobFilter, one clause per field given."""

from __future__ import annotations

from podium.api.selection import JobFilter
from podium.store.job_table import job_where


def test_the_default_filter_lists_pending_and_running_jobs() -> None:
    assert job_where(JobFilter()) == ("WHERE state IN (?,?)", ["PENDING", "RUNNING"])
    assert job_where(JobFilter(finished=True)) == ("", [])


def test_each_field_given_adds_its_clause_and_value() -> None:
    where, args = job_where(
        JobFilter(("COMPLETED",), user="alice", name="x", since=10.0, until=20.0)
    )
    assert where == (
        "WHERE state IN (?) AND user=? AND name=? AND (end_time IS NULL OR end_time >= ?)"
        " AND submit_time <= ?"
    )
    assert args == ["COMPLETED", "alice", "x", 10.0, 20.0]


def test_completing_means_running_rows_whose_end_is_given() -> None:
    where, args = job_where(JobFilter(("COMPLETING",)))
    assert where == "WHERE (state IN (?) OR (state='RUNNING' AND ending IS NOT NULL))"
    assert args == ["COMPLETING"]


def test_a_hostile_value_is_a_parameter_never_sql() -> None:
    where, args = job_where(JobFilter(user="x' OR '1'='1"))
    assert "'1'" not in where and args[-1] == "x' OR '1'='1"
