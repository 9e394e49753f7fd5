"""A small JSON client for the daemon's unix socket.

It uses the standard library's http.client rather than httpx: a `podium` command is
a new process each time, and httpx's import and client set-up (~190 ms, it loads an
SSL context and Rich) would dominate a shell loop of `podium submit` calls. The
tests and benchmarks drive the same API with httpx.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

from podium import paths
from podium.errors import ApiError, DaemonUnavailable


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


RETRY_DELAYS = (0.1, 0.3, 1.0)  # seconds before each retry: at most three
_NOT_IDEMPOTENT = ("/v1/inject",)  # doing it twice would hit a second rank


def _retry_safe(method: str, path: str, body: Any) -> bool:
    """Whether sending this request twice has the effect of sending it once."""
    if method == "GET":
        return True
    if path.split("?")[0] == "/v1/jobs":  # a submission: safe only with its key
        return isinstance(body, dict) and bool(body.get("idempotency_key"))
    return not path.startswith(_NOT_IDEMPOTENT)


class Client:
    """Calls the daemon at HOME/podium.sock (HOME: $PODIUM_HOME or the default)."""

    def __init__(self, home: Path | None = None, timeout: float = 60.0) -> None:
        self.home = home or paths.home()
        self.socket = str(paths.socket_path(self.home))
        self.timeout = timeout
        self._conn: _UnixConnection | None = None

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any:
        """Send one request; return the decoded JSON, or raise ApiError / DaemonUnavailable.

        A request cut off on the way (connection reset or closed before the answer, or a
        daemon restarting) is sent again, at most RETRIES times, when doing it twice does
        no harm: reads, the idempotent changes, and submissions carrying an idempotency
        key (the daemon then returns the job the first attempt created).
        """
        if query:
            clean = {k: v for k, v in query.items() if v is not None}
            if clean:
                path = f"{path}?{urlencode(clean)}"
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        safe = _retry_safe(method, path, body)
        delays = RETRY_DELAYS if safe else ()
        for attempt in range(len(delays) + 1):
            if self._conn is None:
                self._conn = _UnixConnection(self.socket, self.timeout)
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                response = self._conn.getresponse()
                data = response.read()
                break
            except FileNotFoundError:
                self.close()
                raise DaemonUnavailable(
                    f"no Podium daemon at {self.socket} (start one with: podium up)"
                ) from None
            except (
                ConnectionRefusedError,
                http.client.RemoteDisconnected,
                BrokenPipeError,
                ConnectionResetError,
                TimeoutError,
            ) as exc:
                self.close()
                if attempt == len(delays):
                    what = (
                        "refused the connection"
                        if isinstance(exc, ConnectionRefusedError)
                        else "closed the connection before answering"
                    )
                    hint = "" if safe else " (not retried: it may have been carried out)"
                    raise DaemonUnavailable(f"the daemon at {self.socket} {what}{hint}") from None
                time.sleep(delays[attempt])
        try:
            decoded = json.loads(data) if data else None
        except ValueError:
            raise ApiError(f"the daemon answered {response.status} with non-JSON", 502) from None
        if response.status >= 400:
            message = decoded.get("error") if isinstance(decoded, dict) else None
            raise ApiError(str(message or f"HTTP {response.status}"), response.status)
        return decoded

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body if body is not None else {})

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class Api(Protocol):
    """What the commands call: the daemon's client, or the Slurm backend."""

    def request(
        self, method: str, path: str, body: Any = None, query: dict[str, Any] | None = None
    ) -> Any: ...

    def get(self, path: str, **query: Any) -> Any: ...

    def post(self, path: str, body: Any = None) -> Any: ...

    def close(self) -> None: ...


def config_file(home: Path | None = None) -> Path:
    """The cluster config the CLI reads: $PODIUM_CONFIG, else HOME/cluster.yaml."""
    explicit = os.environ.get("PODIUM_CONFIG")
    return Path(explicit) if explicit else paths.config_path(home)


def connect(home: Path | None = None, timeout: float = 60.0) -> Api:
    """The API for this cluster: the Slurm backend when the cluster config says
    `backend: slurm`, else the local daemon. Only a Slurm config pays for loading it."""
    path = config_file(home)
    try:
        text = path.read_text()
    except OSError:
        text = ""
    if re.search(r"^backend:\s*[\"']?slurm\b", text, re.M):
        from podium.slurm.api import SlurmApi
        from podium.spec.cluster import parse_config

        return SlurmApi(parse_config(text, str(path)), home)
    return Client(home, timeout)
