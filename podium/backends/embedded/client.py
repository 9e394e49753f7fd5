"""The embedded backend: the daemon's API over its unix socket, as typed calls.

The client speaks the little HTTP/1.1 it needs over the socket itself (unixhttp): a `podium`
command is a new process each time, and importing http.client (~45 ms: it loads the
email package) or httpx (~190 ms) would dominate a shell loop of `podium submit`
calls. For the same reason it reads and writes JSON with `podium.api.lightjson` (the
json package loads `re`). The tests and benchmarks drive the same API with httpx.
"""

from __future__ import annotations

import time

from podium import paths
from podium.api import lightjson
from podium.api.backend_protocol import Backend
from podium.backends.embedded.unixhttp import (
    ClosedEarly,
    NotListening,
    TcpConnection,
    TlsFailed,
    UnixConnection,
    query_string,
    split_url,
)
from podium.errors import ApiError, DaemonUnavailable

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path
    from typing import Any, ClassVar

    from podium.api.backend_protocol import Action
    from podium.api.selection import JobFilter, Selection

RETRY_DELAYS = (0.1, 0.3, 1.0)  # seconds before each retry; the last repeats
RETRY_WINDOW_S = 30.0  # how long a safe request waits for a daemon that went away
_NOT_IDEMPOTENT = ("/v1/inject",)  # doing it twice would hit a second rank


def _retry_safe(method: str, path: str, body: Any) -> bool:
    """Whether sending this request twice has the effect of sending it once."""
    if method == "GET":
        return True
    if path.split("?")[0] in ("/v1/jobs", "/v1/jobs/batch"):  # safe only with a key
        return isinstance(body, dict) and bool(body.get("idempotency_key"))
    return not path.startswith(_NOT_IDEMPOTENT)


def _retry_window() -> float:
    """$PODIUM_RETRY_S, else RETRY_WINDOW_S (seconds; a bad value: the default)."""
    import os

    try:
        return max(0.0, float(os.environ.get("PODIUM_RETRY_S") or RETRY_WINDOW_S))
    except ValueError:
        return RETRY_WINDOW_S


def _what(failure: OSError) -> str:
    if isinstance(failure, NotListening):
        return "refused the connection"
    if isinstance(failure, FileNotFoundError):
        return "went away and did not come back"
    if isinstance(failure, ConnectionRefusedError):
        return "refused the connection"
    return "closed the connection before answering"


def _gave_up(
    socket: str, failures: list[OSError], safe: bool, maybe_done: bool, window: float
) -> str:
    """The one line said when a request is given up: what happened (first, and last
    when it differs), and whether the daemon may have carried it out."""
    first, last = _what(failures[0]), _what(failures[-1])
    what = first if first == last else f"{first}, then {last.removesuffix(' the connection')}"
    if maybe_done and not safe:
        return f"the daemon at {socket} {what} (not retried: it may have been carried out)"
    where = f"the daemon at {socket} {what} (retried for {window:g} s)"
    if maybe_done:
        return f"{where}: it may have been carried out; for a submit, check `podium queue`"
    return f"{where}: nothing was carried out"


class Client:
    """Calls the daemon at HOME/podium.sock (HOME: $PODIUM_HOME or the default), or,
    when no `home` is given and $PODIUM_URL names one, the daemon's HTTP listener there
    with the bearer token in $PODIUM_TOKEN. A safe request rides out a daemon restart
    for `retry_s` seconds (None: $PODIUM_RETRY_S, else RETRY_WINDOW_S); 0 asks once.
    Raises ApiError for a $PODIUM_URL that is not http(s)://HOST:PORT."""

    def __init__(
        self, home: Path | str | None = None, timeout: float = 60.0, retry_s: float | None = None
    ) -> None:
        import os

        url = os.environ.get("PODIUM_URL") if home is None else None
        self.address: tuple[str, int] | None = None
        self.tls = False
        self.headers: dict[str, str] = {}
        if url:
            try:
                host, port, self.tls = split_url(url)
                self.address = (host, port)
            except ValueError as exc:
                raise ApiError(str(exc), 400) from None
            self.socket = url
            token = os.environ.get("PODIUM_TOKEN", "").strip()
            if token:
                self.headers["Authorization"] = f"Bearer {token}"
        else:
            self.socket = paths.socket_file(home)
        self.timeout = timeout
        self.retry_s = retry_s
        self._conn: UnixConnection | None = None

    def _connection(self) -> UnixConnection:
        if self.address is not None:
            return TcpConnection(*self.address, self.timeout, self.tls)
        return UnixConnection(self.socket, self.timeout)

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        """Send one request; return the decoded JSON, or raise ApiError / DaemonUnavailable
        (see `request_text`)."""
        _, data = self.request_text(method, path, body, query)
        return lightjson.loads(data) if data else None

    def request_text(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> tuple[int, str]:
        """Send one request; return the status and the JSON text of a successful answer,
        or raise ApiError / DaemonUnavailable.

        A request cut off on the way (connection reset or closed before the answer, a
        daemon restarting: its socket gone or refusing) is sent again, the same, until
        the daemon answers or `$PODIUM_RETRY_S` (RETRY_WINDOW_S) have passed, when doing
        it twice does no harm: reads, the idempotent changes, and submissions carrying
        an idempotency key (the daemon then returns the job the first attempt created,
        across a restart: the key is stored with the job). A request that was never
        sent (the connection refused) waits the same, whatever it is. Where no socket
        file was ever found it fails at once; over TCP, where a restarting daemon and
        none look alike, it waits the window. When it gives up on a request the daemon
        may have carried out, DaemonUnavailable says so (check `podium queue`).
        """
        if query:
            clean = {k: v for k, v in query.items() if v is not None}
            if clean:
                path = f"{path}?{query_string(clean)}"
        payload = lightjson.dumps(body).encode() if body is not None else None
        headers = dict(self.headers)
        if payload is not None:
            headers["Content-Type"] = "application/json"
        safe = _retry_safe(method, path, body)
        give_up_at: float | None = None  # set at the first failure
        maybe_done = False  # a request was sent and its answer lost
        failures: list[OSError] = []
        attempt = 0
        while True:
            if self._conn is None:
                self._conn = self._connection()
            try:
                response = self._conn.request(method, path, payload, headers)
                data = response.body
                break
            except FileNotFoundError as exc:
                self.close()
                if give_up_at is None and self.address is None:  # no socket file: no daemon
                    raise DaemonUnavailable(
                        f"no Podium daemon at {self.socket} (start one with: podium up)"
                    ) from None
                # Over TCP a daemon restarting and no daemon look the same (nothing
                # listens): the request, never sent, waits for the window either way.
                failures.append(exc)
            except TlsFailed as exc:
                self.close()
                raise DaemonUnavailable(str(exc)) from None
            except PermissionError:
                self.close()
                raise DaemonUnavailable(
                    f"cannot reach the Podium daemon at {self.socket}: permission denied "
                    "(set PODIUM_HOME to a cluster you may use, or PODIUM_CONFIG to a "
                    "config file you may read)"
                ) from None
            except (
                ConnectionRefusedError,
                ClosedEarly,
                BrokenPipeError,
                ConnectionResetError,
                TimeoutError,
            ) as exc:
                self.close()
                maybe_done = maybe_done or not isinstance(exc, ConnectionRefusedError)
                failures.append(exc)
            now = time.monotonic()
            window = _retry_window() if self.retry_s is None else self.retry_s
            if give_up_at is None:
                give_up_at = now + window
            if (maybe_done and not safe) or now >= give_up_at:
                if not maybe_done and all(isinstance(f, NotListening) for f in failures):
                    raise DaemonUnavailable(
                        f"no Podium daemon at {self.socket}: nothing listened there for "
                        f"{window:g} s (start one with: podium up --http HOST:PORT; "
                        "PODIUM_RETRY_S sets how long to wait)"
                    ) from None
                raise DaemonUnavailable(
                    _gave_up(self.socket, failures, safe, maybe_done, window)
                ) from None
            time.sleep(RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)])
            attempt += 1
        if not response.getheader("Content-Type", "").startswith("application/json"):
            raise ApiError(f"the daemon answered {response.status} with non-JSON", 502)
        text = data.decode()
        if response.status >= 400:
            try:
                decoded = lightjson.loads(text)
            except ValueError:
                raise ApiError(
                    f"the daemon answered {response.status} with non-JSON", 502
                ) from None
            message = decoded.get("error") if isinstance(decoded, dict) else None
            raise ApiError(str(message or f"HTTP {response.status}"), response.status)
        return response.status, text

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body if body is not None else {})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


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
