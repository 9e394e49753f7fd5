"""The Backend protocol: what the CLI asks of a cluster, whatever runs it (stdlib only).

As torchx's schedulers do, the public methods live on the base class and each backend
fills in narrow hooks (`_submit`, `_jobs`, ...): REQUIRED_HOOKS always, FEATURE_HOOKS
unless declared impossible, checked when the class is defined (podium.api.backend_contract).
What a backend cannot do is declared once, with the reason, in its `CANNOT` table
(SkyPilot's CloudImplementationFeatures): the base class refuses those calls from the
table, before any hook runs, so every refusal names the backend, the feature and the
reason the same way.

Records are the documented JSON (`podium.api.records`); requests are the daemon's
submit body (`SubmitRequest`'s fields) and a `Selection` of jobs.
"""

from __future__ import annotations

from podium.api.backend_contract import ContractError, Feature, contract_breaches
from podium.errors import ApiError

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence
    from typing import Any, ClassVar, Literal

    from podium.api.selection import JobFilter, Selection

    Action = Literal["cancel", "hold", "release", "requeue"]


def records_json(records: list[dict[str, Any]]) -> str:
    """A list of records as JSON text, one record per line (what `--json` prints for
    listings; json's indenting encoder is pure Python and takes a second for 10,000)."""
    if not records:
        return "[]\n"
    import json

    return "[\n  " + ",\n  ".join(json.dumps(r) for r in records) + "\n]\n"


def _all_current() -> JobFilter:
    """The default filter: pending and running jobs."""
    from podium.api.selection import JobFilter

    return JobFilter()


class Unsupported(ApiError):
    """The backend cannot do this (declared in its CANNOT table): a request that is
    wrong for this backend, so exit status 2 like any other bad request."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 501)
        self.exit_code = 2


class Backend:
    """A cluster the CLI can use. Subclasses set `name`, `CANNOT`, and the hooks: every
    hook of REQUIRED_HOOKS, and each of FEATURE_HOOKS unless CANNOT declares its
    feature with the reason. A concrete subclass (one that sets `name`) that breaks
    this fails when it is defined, with ContractError naming each breach."""

    name: ClassVar[str] = ""
    CANNOT: ClassVar[Mapping[str, str]] = {}  # Feature -> why not

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.name:  # a concrete backend; an unnamed one is a base for others
            breaches = contract_breaches(cls, Backend)
            if breaches:
                raise ContractError("; ".join(breaches))

    def refuse(self, feature: str) -> None:
        """Raise Unsupported when this backend declared it cannot do `feature` (a
        Feature)."""
        reason = self.CANNOT.get(feature)
        if reason is not None:
            raise Unsupported(f"{feature} is not available on the {self.name} backend: {reason}")

    # --- the public methods ------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        """Who the caller is to this cluster, and what runs it."""
        return self._ping()

    def submit(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Submit a job (every task of an array); their records. With `test_only`, one
        WOULD_QUEUE record and nothing queued. What the user should know of an accepted
        job (an option recorded but not applied) is left in `warnings`."""
        self.warnings: list[str] = []
        return self._submit(request)

    def submit_batch(
        self, requests: Sequence[Mapping[str, Any]], idempotency_key: str | None = None
    ) -> list[list[int]]:
        """Submit several jobs (submit requests) at once, all accepted or none; each
        one's job ids (an array's tasks). A retry with the same key returns the first
        attempt's ids."""
        self.refuse(Feature.BATCH)
        return self._submit_batch(requests, idempotency_key)

    def dry_run(self, request: Mapping[str, Any]) -> str:
        """What this backend would run for `request`, as text for people: the launch
        plan (embedded) or the sbatch script (Slurm). Nothing is queued."""
        return self._dry_run(request)

    def jobs(self, which: JobFilter | None = None) -> list[dict[str, Any]]:
        """Jobs as `which` selects them (default: pending and running)."""
        return self._jobs(which or _all_current())

    def jobs_table(
        self, fields: tuple[str, ...], which: JobFilter | None = None
    ) -> list[dict[str, Any]]:
        """The same jobs with only these record keys (what a table shows: a backend
        may fetch less)."""
        return self._jobs_table(fields, which or _all_current())

    def jobs_json(self, which: JobFilter | None = None) -> str:
        """The same jobs as JSON text for `--json`: a list, one record per line."""
        return self._jobs_json(which or _all_current())

    def job(self, job_id: int, task: int | None = None) -> dict[str, Any]:
        """One job in full (its script, spec and events where the backend has them);
        with `task`, task `task` of array `job_id` (while it waits unstarted in its
        array's record, that record)."""
        return self._job(job_id, task)

    def log_lines(self, job_id: int, stderr: bool, follow: bool) -> Iterator[str] | None:
        """The job's output as lines where the backend serves it itself (Kubernetes:
        the first pod's log); None where it is a file the record names (`stdout`,
        `stderr`), which the caller reads."""
        return None

    def control(self, action: Action, selection: Selection) -> list[int]:
        """Cancel, hold, release or requeue the selected jobs (an array task named
        alone acts on that task only); the ids it acted on, whose names as users write
        them ("4_0" for an array's task) `names` then holds where they differ."""
        self.names: dict[int, str] = {}
        return self._control(action, selection)

    def named(self, job_ids: Sequence[int]) -> list[str]:
        """`job_ids` as users name them (what the last `control` learnt of them)."""
        names = getattr(self, "names", {})
        return [names.get(j, str(j)) for j in job_ids]

    def send_signal(self, selection: Selection, sig: int, scope: str = "steps") -> list[int]:
        """`scancel --signal`: `sig` to the selected running jobs' srun steps ("steps"),
        batch shell ("batch") or every process ("full"); the ids signalled."""
        return self._send_signal(selection, sig, scope)

    def acct(self, which: JobFilter | None = None) -> list[dict[str, Any]]:
        """Jobs that started or ended (accounting, like sacct)."""
        return self._acct(which or _all_current())

    def set_time_limit(self, job_id: int, seconds: int | None) -> dict[str, Any]:
        """Change a pending or running job's time limit (None: unlimited), as `scontrol
        update JobId=N TimeLimit=...`: its owner may lower it, an administrator may also
        raise it. The job's record after the change."""
        return self._set_time_limit(job_id, seconds)

    def set_nice(self, job_id: int, nice: int) -> dict[str, Any]:
        """Change a pending job's nice value, as `scontrol update JobId=N Nice=V`: its
        owner may raise it (a lower priority), an administrator may also lower it. The
        job's record after the change."""
        return self._set_nice(job_id, nice)

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes()

    def drain(self, node: str, reason: str) -> dict[str, Any]:
        """Take `node` out of service for new jobs (running ones go on), with a one-line
        reason (ApiError 400 otherwise); its record after."""
        reason = reason.strip()
        if not reason or "\n" in reason:
            raise ApiError(
                "a drain needs a reason (one line): podium drain NODE --reason TEXT", 400
            )
        return self._drain(node, reason)

    def resume(self, node: str, gpu: int | None = None) -> dict[str, Any]:
        if gpu is not None:
            self.refuse(Feature.GPU_RESUME)
        return self._resume(node, gpu)

    def priorities(self) -> list[dict[str, Any]]:
        self.refuse(Feature.PRIORITIES)
        return self._priorities()

    def share(self) -> dict[str, Any]:
        self.refuse(Feature.FAIR_SHARE)
        return self._share()

    def checkpoint(self, job_id: int, step: int) -> dict[str, Any]:
        """A running job says it finished a checkpoint at `step` (podium checkpoint)."""
        self.refuse(Feature.CHECKPOINT_REPORT)
        return self._checkpoint(job_id, step)

    def progress(self, job_id: int, done: float, total: float) -> dict[str, Any]:
        """A running job says it has done `done` of `total` (podium progress)."""
        self.refuse(Feature.PROGRESS_REPORT)
        return self._progress(job_id, done, total)

    def teams(self) -> list[dict[str, Any]]:
        """Each team's GPU quota, limits, use, borrowed and lent GPUs (podium teams;
        `sched.team_ledger.team_table`'s records)."""
        self.refuse(Feature.TEAMS)
        return self._teams()

    def forecast(self) -> list[dict[str, Any]]:
        """Each pending job's expected start, node and GPUs (podium queue --start)."""
        self.refuse(Feature.FORECAST)
        return self._forecast()

    def mig_advice(self) -> dict[str, Any]:
        """The MIG layouts the pending queue would be served best by (podium mig)."""
        self.refuse(Feature.MIG_ADVICE)
        return self._mig_advice()

    def mig_apply(self, gpu: int, layout: str) -> dict[str, Any]:
        """Drain GPU `gpu`, then re-split it as `layout` (profiles joined by commas, or
        "whole") and return it to service after a health check (podium mig apply)."""
        self.refuse(Feature.MIG_APPLY)
        return self._mig_apply(gpu, layout)

    def health(self, deep: bool) -> dict[str, Any]:
        self.refuse(Feature.HEALTH)
        return self._health(deep)

    def inject(self, fault: Mapping[str, Any]) -> dict[str, Any]:
        self.refuse(Feature.FAULT_INJECTION)
        return self._inject(fault)

    def shutdown(self) -> dict[str, Any]:
        self.refuse(Feature.SHUTDOWN)
        return self._shutdown()

    def close(self) -> None:
        """Let go of connections (the backend may be used again after)."""

    # --- the hooks ---------------------------------------------------------------------

    def _ping(self) -> dict[str, Any]:
        raise NotImplementedError

    def _submit(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _submit_batch(
        self, requests: Sequence[Mapping[str, Any]], idempotency_key: str | None
    ) -> list[list[int]]:
        raise NotImplementedError

    def _dry_run(self, request: Mapping[str, Any]) -> str:
        raise NotImplementedError

    def _jobs(self, which: JobFilter) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _jobs_table(self, fields: tuple[str, ...], which: JobFilter) -> list[dict[str, Any]]:
        return [{f: job[f] for f in fields} for job in self._jobs(which)]

    def _jobs_json(self, which: JobFilter) -> str:
        return records_json(self._jobs(which))

    def _job(self, job_id: int, task: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def _control(self, action: Action, selection: Selection) -> list[int]:
        raise NotImplementedError

    def _send_signal(self, selection: Selection, sig: int, scope: str) -> list[int]:
        raise NotImplementedError

    def _acct(self, which: JobFilter) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _set_time_limit(self, job_id: int, seconds: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def _set_nice(self, job_id: int, nice: int) -> dict[str, Any]:
        raise NotImplementedError

    def _nodes(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _drain(self, node: str, reason: str) -> dict[str, Any]:
        raise NotImplementedError

    def _resume(self, node: str, gpu: int | None) -> dict[str, Any]:
        raise NotImplementedError

    def _priorities(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _share(self) -> dict[str, Any]:
        raise NotImplementedError

    def _teams(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _forecast(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _checkpoint(self, job_id: int, step: int) -> dict[str, Any]:
        raise NotImplementedError

    def _progress(self, job_id: int, done: float, total: float) -> dict[str, Any]:
        raise NotImplementedError

    def _mig_advice(self) -> dict[str, Any]:
        raise NotImplementedError

    def _mig_apply(self, gpu: int, layout: str) -> dict[str, Any]:
        raise NotImplementedError

    def _health(self, deep: bool) -> dict[str, Any]:
        raise NotImplementedError

    def _inject(self, fault: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _shutdown(self) -> dict[str, Any]:
        raise NotImplementedError


__all__ = ["Backend", "Feature", "Unsupported", "records_json"]  # Feature: backend_contract's
