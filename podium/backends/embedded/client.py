"""The embedded backend: the daemon's API over its unix socket, as typed calls.

Its Client (podium.backends.embedded.daemon_api) speaks the little HTTP/1.1 it needs
over the socket itself (unixhttp): a `podium`
command is a new process each time, and importing http.client (~45 ms: it loads the
email package) or httpx (~190 ms) would dominate a shell loop of `podium submit`
calls. For the same reason it reads and writes JSON with `podium.api.lightjson` (the
json package loads `re`). The tests and benchmarks drive the same API with httpx.
"""

from __future__ import annotations

from podium.api.backend_protocol import Backend
from podium.backends.embedded.daemon_api import Client

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any, ClassVar

    from podium.api.backend_protocol import Action
    from podium.api.selection import JobFilter, Selection


class EmbeddedBackend(Backend):
    """The embedded cluster: typed calls to its daemon's API on HOME/podium.sock."""

    name = "embedded"
    CANNOT: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self, home: Path | str | None = None, timeout: float = 60.0, retry_s: float | None = None
    ) -> None:
        self.client = Client(home, timeout, retry_s)

    def close(self) -> None:
        self.client.close()

    def _ping(self) -> dict[str, Any]:
        return dict(self.client.get("/v1/ping"), backend=self.name)

    def _submit(self, request: Mapping[str, Any]) -> list[dict[str, Any]]:
        answer = self.client.post("/v1/jobs", dict(request))
        self.warnings.extend(str(w) for w in answer.get("warnings") or ())
        jobs: list[dict[str, Any]] = answer["jobs"]
        return jobs

    def _submit_batch(
        self, requests: Sequence[Mapping[str, Any]], idempotency_key: str | None
    ) -> list[list[int]]:
        body: dict[str, Any] = {"jobs": [dict(r) for r in requests]}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        job_ids: list[list[int]] = self.client.post("/v1/jobs/batch", body)["job_ids"]
        return job_ids

    def _dry_run(self, request: Mapping[str, Any]) -> str:
        answer = self.client.post("/v1/jobs/dry-run", dict(request))
        import json

        return json.dumps(answer, indent=2) + "\n"

    def _jobs(self, which: JobFilter) -> list[dict[str, Any]]:
        return self._listing("/v1/jobs", which)

    def _forecast(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self.client.get("/v1/forecast")["jobs"]
        return found

    def _jobs_table(self, fields: tuple[str, ...], which: JobFilter) -> list[dict[str, Any]]:
        query = dict(self._query(which), fields=",".join(fields))
        answer = self.client.request("GET", "/v1/jobs", query=query)
        names = answer["fields"]
        return [dict(zip(names, row, strict=True)) for row in answer["rows"]]

    def _jobs_json(self, which: JobFilter) -> str:
        # The daemon already writes one record per line: pass its text through.
        _, text = self.client.request_text("GET", "/v1/jobs", query=self._query(which))
        envelope = '{"jobs":'
        if not (text.startswith(envelope) and text.endswith("}")):
            return super()._jobs_json(which)
        return text[len(envelope) : -1].strip() + "\n"

    def _acct(self, which: JobFilter) -> list[dict[str, Any]]:
        return self._listing("/v1/acct", which)

    def _listing(self, path: str, which: JobFilter) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.client.request("GET", path, query=self._query(which))[
            "jobs"
        ]
        return jobs

    @staticmethod
    def _query(which: JobFilter) -> dict[str, Any]:
        return {
            "state": ",".join(which.states) if which.states else None,
            "user": which.user,
            "name": which.name,
            "all": "true" if which.finished else None,
            "since": which.since,
            "until": which.until,
        }

    def _job(self, job_id: int, task: int | None) -> dict[str, Any]:
        query = f"?task={task}" if task is not None else ""
        record: dict[str, Any] = self.client.get(f"/v1/jobs/{job_id}{query}")
        return record

    def _control(self, action: Action, selection: Selection) -> list[int]:
        body: dict[str, Any] = {"job_ids": list(selection.job_ids)}
        if selection.tasks:
            body["tasks"] = [list(t) for t in selection.tasks]
        if selection.user is not None:
            body["user"] = selection.user
        if selection.name is not None:
            body["name"] = selection.name
        if selection.states is not None:
            body["states"] = list(selection.states)
        key = {"cancel": "cancelled", "hold": "held", "release": "released", "requeue": "requeued"}[
            action
        ]
        answer = self.client.post(f"/v1/jobs/{action}", body)
        done: list[int] = answer[key]
        shown = answer.get("display_ids") or []
        if len(shown) == len(done):
            self.names = {j: str(n) for j, n in zip(done, shown, strict=True) if str(j) != n}
        return done

    def _send_signal(self, selection: Selection, sig: int, scope: str) -> list[int]:
        body: dict[str, Any] = {"job_ids": list(selection.job_ids), "signal": sig, "scope": scope}
        if selection.tasks:
            body["tasks"] = [list(t) for t in selection.tasks]
        done: list[int] = self.client.post("/v1/jobs/signal", body)["signalled"]
        return done

    def _set_time_limit(self, job_id: int, seconds: int | None) -> dict[str, Any]:
        job: dict[str, Any] = self.client.post(
            f"/v1/jobs/{job_id}/time-limit", {"time_limit_s": seconds}
        )
        return job

    def _set_nice(self, job_id: int, nice: int) -> dict[str, Any]:
        job: dict[str, Any] = self.client.post(f"/v1/jobs/{job_id}/nice", {"nice": nice})
        return job

    def _nodes(self) -> list[dict[str, Any]]:
        nodes: list[dict[str, Any]] = self.client.get("/v1/nodes")["nodes"]
        return nodes

    def _drain(self, node: str, reason: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post(f"/v1/nodes/{node}/drain", {"reason": reason})
        return answer

    def _resume(self, node: str, gpu: int | None) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post(f"/v1/nodes/{node}/resume", {"gpu": gpu})
        return answer

    def _priorities(self) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.client.get("/v1/priority")["jobs"]
        return jobs

    def _share(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.get("/v1/share")
        return answer

    def _checkpoint(self, job_id: int, step: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post(f"/v1/jobs/{job_id}/checkpoint", {"step": step})
        return answer

    def _progress(self, job_id: int, done: float, total: float) -> dict[str, Any]:
        body = {"done": done, "total": total}
        answer: dict[str, Any] = self.client.post(f"/v1/jobs/{job_id}/progress", body)
        return answer

    def _teams(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self.client.get("/v1/teams")["teams"]
        return answer

    def _mig_advice(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.get("/v1/mig/advice")
        return answer

    def _mig_apply(self, gpu: int, layout: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post("/v1/mig/apply", {"gpu": gpu, "layout": layout})
        return answer

    def _health(self, deep: bool) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post("/v1/health", {"deep": deep})
        return answer

    def _inject(self, fault: Mapping[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post("/v1/inject", dict(fault))
        return answer

    def _shutdown(self) -> dict[str, Any]:
        answer: dict[str, Any] = self.client.post("/v1/shutdown")
        return answer


__all__ = ["Client", "EmbeddedBackend"]  # Client: daemon_api's, used from here too
