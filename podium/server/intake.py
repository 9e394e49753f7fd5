"""Intake: a submission checked, admitted and committed, or refused with the reason.

Checks, in order: the state disk has room; the daemon may run jobs for the caller; a
retried submission returns the first one's jobs; the request builds a valid job for
this cluster (spec.build); its directories are usable by the user; its QoS's submit
limit; its dependencies name known jobs. Nothing is stored when any check fails or
with `test_only`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from podium.api.caller import Caller, user_name
from podium.config.cluster import ClusterConfig
from podium.errors import PermissionDenied, SpecError, StoreError
from podium.jobspec.build import Built, SubmitRequest, build_job
from podium.jobspec.job import JobState
from podium.jobspec.test_only import test_only_answer
from podium.run.dircheck_helper import DirCheckers
from podium.run.identity import DirCheckError, check_dirs_as_user
from podium.server.embedded_admission import EmbeddedAdmission
from podium.server.job_rows import job_record
from podium.server.launch import Planner
from podium.store.db import Row, Store

ACTIVE = (JobState.PENDING.value, JobState.RUNNING.value)


class Intake:
    """Admits submissions to one embedded cluster."""

    def __init__(self, home: Path, config: ClusterConfig, store: Store, planner: Planner) -> None:
        self.home = home
        self.config = config
        self.store = store
        self.planner = planner
        self.checkers = DirCheckers()  # one helper per user, not a /bin/sh per submission

    def check(self, req: SubmitRequest, who: Caller, now: float) -> Built:
        """The job `req` asks for, checked for this cluster and this caller; raises
        PodiumError with the reason. Stores nothing."""
        return self.check_all([req], who, now)[0]

    def check_all(self, reqs: list[SubmitRequest], who: Caller, now: float) -> list[Built]:
        """`check` for each request, as one submission (their directories checked as
        the user at once, the QoS submit limits counting them all); the first bad one
        raises, its position named when there are several."""
        if self.store.reserve_released:
            raise StoreError(
                f"the state disk is full: submissions are refused until there is room on the "
                f"filesystem of {self.home} (what is left records running jobs' outcomes)"
            )
        owner = self.planner.owner_uid
        if owner != 0 and who.uid != owner:
            raise PermissionDenied(
                f"this daemon runs as {user_name(owner)} and can run jobs only for "
                f"that user; start it as root to serve several users"
            )
        if self.config.names_groups and not who.groups:
            who = who.with_groups()
        built: list[Built] = []
        for number, req in enumerate(reqs, 1):
            with _naming(number, len(reqs)):
                built.append(build_job(req, self.config, who, now, EmbeddedAdmission()))
        self._check_dirs(built, who)
        adding: dict[str, int] = {}
        active: dict[str, int] = {}  # each QoS's queued and running jobs, counted once
        for number, one in enumerate(built, 1):
            with _naming(number, len(reqs)):
                qos = one.spec.qos
                adding[qos] = adding.get(qos, 0) + (one.spec.array.count if one.spec.array else 1)
                self._check_submit_limit(qos, adding[qos], who, active)
                self._check_dependencies(one)
        return built

    def _check_dirs(self, built: list[Built], who: Caller) -> None:
        """The jobs' directories, usable by the user: one check as the user for all (a
        working directory the caller's process is in needs none)."""
        here = os.path.normpath(who.cwd) if who.cwd else None
        enter = [
            d for d in dict.fromkeys(d for b in built for d in b.enter_dirs)
            if os.path.normpath(d) != here
        ]  # fmt: skip
        write = list(dict.fromkeys(d for b in built for d in b.write_dirs))
        read = list(dict.fromkeys(p for b in built for p in b.read_paths))
        outputs = list(dict.fromkeys(p for b in built for p in b.output_files))
        inputs = list(dict.fromkeys(p for b in built for p in b.input_files))
        try:  # returns at once when nothing needs a look
            check_dirs_as_user(
                self.planner.identity(who.uid, who.gid, who.name, built[0].spec.umask),
                enter=enter,
                write=write,
                read=read,
                outputs=outputs,
                inputs=inputs,
                ask=self.checkers.ask,
            )
        except DirCheckError as exc:
            raise SpecError(f"the job's files: {exc}") from None

    def _check_dependencies(self, one: Built) -> None:
        dep_ids = {j for d in one.spec.dependencies for j in d.job_ids}
        if not dep_ids:
            return
        known = set(self.store.states_of(dep_ids)) | set(self.store.array_members(dep_ids))
        missing = sorted(dep_ids - known)
        if missing:
            raise SpecError(
                f"{one.dependency_where}: --dependency: no job {missing[0]} "
                "(dependencies must name submitted jobs)"
            )

    def submit(self, req: SubmitRequest, who: Caller, now: float) -> Submitted:
        """Validate and commit a job (all tasks of an array); return their records and
        what the user should know of it (accepted, but not as asked).

        Nothing is stored when the request is invalid or `test_only` is set (then the
        reply is one WOULD_QUEUE record).
        """
        if req.idempotency_key is not None and not req.test_only:
            earlier = self.store.submitted(who.uid, req.idempotency_key)
            if earlier is not None:  # a retry of a submission that was committed
                return Submitted([job_record(r, now) for r in self.store.jobs_by_ids(earlier)])
        built = self.check(req, who, now)
        spec, warnings = built.spec, list(built.warnings)
        if req.test_only:
            return Submitted([test_only_answer(spec)], warnings)
        ids = self.store.insert_jobs(
            spec,
            uid=who.uid,
            gid=who.gid,
            user=who.name,
            now=now,
            idempotency_key=req.idempotency_key,
        )
        return Submitted([job_record(r, now) for r in self.store.jobs_by_ids(ids)], warnings)

    def _check_submit_limit(
        self, qos: str, adding: int, who: Caller, active: dict[str, int]
    ) -> None:
        """Refuse `adding` more jobs in `qos` over its max_submit_jobs_per_user; the
        user's queued and running jobs per QoS are counted once into `active`."""
        level = self.config.qos_level(qos)
        cap = level.max_submit_jobs_per_user if level else None
        if cap is None:
            return
        if qos not in active:
            active[qos] = self.store.count_jobs(states=ACTIVE, user=who.name, qos=qos)
        if active[qos] + adding > cap:
            raise SpecError(
                f"QOSMaxSubmitJobPerUserLimit: QoS {qos} allows {cap} queued or running "
                f"jobs per user; you have {active[qos]} and this adds {adding}"
            )

    def submit_batch(
        self, reqs: list[SubmitRequest], who: Caller, now: float, idempotency_key: str | None
    ) -> list[list[int]]:
        """Validate every request, then commit them all in one transaction (none when
        one is refused); each request's job ids. A retried batch (same key) returns
        the first one's ids."""
        if idempotency_key is not None:
            earlier = self.store.submitted(who.uid, idempotency_key)
            if earlier is not None:
                rows = self.store.jobs_by_ids(earlier)
                return _regroup(earlier, rows)
        built = self.check_all(reqs, who, now)
        return self.store.insert_batch(
            [b.spec for b in built],
            uid=who.uid,
            gid=who.gid,
            user=who.name,
            now=now,
            idempotency_key=idempotency_key,
        )


def _regroup(ids: list[int], rows: list[Row]) -> list[list[int]]:
    """A batch's flat ids grouped back by job (an array's tasks together)."""
    array_of = {r["job_id"]: r["array_job_id"] for r in rows}
    groups: list[list[int]] = []
    for job_id in ids:
        array = array_of.get(job_id)
        if groups and array is not None and array_of.get(groups[-1][0]) == array:
            groups[-1].append(job_id)
        else:
            groups.append([job_id])
    return groups


@contextmanager
def _naming(number: int, count: int) -> Iterator[None]:
    """Prefix a SpecError raised inside with "job N of M: " when there are several."""
    try:
        yield
    except SpecError as exc:
        if count > 1:
            raise type(exc)(f"job {number} of {count}: {exc}") from None
        raise


class Submitted(NamedTuple):
    """A submission's reply: the jobs' records, and warnings for the user."""

    jobs: list[dict[str, Any]]
    warnings: list[str] = []
