"""The daemon's HTTP API as a small client: requests over its unix socket (or the HTTP
listener), JSON in and out, retries of safe requests while a daemon restarts, and one
line of error when it cannot be reached. Stdlib only, for the same reason as
podium.backends.embedded.client (a `podium` command is a new process each time)."""

from __future__ import annotations

import time

from podium import paths
from podium.api import lightjson
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
    from pathlib import Path
    from typing import Any

    from podium.backends.embedded.unixhttp import Response


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
        response = self._send(method, path, payload, headers, _retry_safe(method, path, body))
        if not response.getheader("Content-Type", "").startswith("application/json"):
            raise ApiError(f"the daemon answered {response.status} with non-JSON", 502)
        text = response.body.decode()
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

    def _send(
        self, method: str, path: str, payload: bytes | None, headers: dict[str, str], safe: bool
    ) -> Response:
        """Send until answered, as `request_text` says (`safe`: sending it twice does no
        harm)."""
        give_up_at: float | None = None  # set at the first failure
        maybe_done = False  # a request was sent and its answer lost
        failures: list[OSError] = []
        attempt = 0
        while True:
            if self._conn is None:
                self._conn = self._connection()
            try:
                return self._conn.request(method, path, payload, headers)
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

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body if body is not None else {})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


__all__ = ["RETRY_DELAYS", "RETRY_WINDOW_S", "Client"]
