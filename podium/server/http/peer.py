"""Caller identity from the unix socket's peer credentials (SO_PEERCRED).

`PeerCredProtocol` is uvicorn's h11 protocol with two additions: on each connection
it reads the peer's pid, uid and gid from the kernel and puts them in the ASGI scope
as scope["podium.peer"] (nothing the client sends can change them), and it gives a
client HEADER_TIMEOUT_S to send each request's line and headers, from the connection's
start or the last answer, before answering 408 and closing (a client that sends a byte
at a time must not hold a connection for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

SCOPE_KEY = "podium.peer"
TOKEN_KEY = "podium.token"  # over HTTP: the id of the token the request came with
HEADER_TIMEOUT_S = 10.0
LISTEN_BACKLOG = 2048  # uvicorn's default backlog
_LATE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
)
_LATE_BODY = (
    b'{"error": "the request line and headers did not arrive within %d s"}' % HEADER_TIMEOUT_S
)


@dataclass(frozen=True)
class PeerCred:
    pid: int
    uid: int
    gid: int


def peer_cred(sock: socket.socket | None) -> PeerCred | None:
    """The credentials of the process at the other end of a unix socket."""
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return PeerCred(pid, uid, gid)


def bind_unix(path: str) -> socket.socket:
    """The daemon's unix socket at `path`, open to every local user (0666, as uvicorn
    makes its own): who may do what is decided by each peer's credentials.

    The socket is bound and listening under a temporary name first and then renamed
    into place, so whoever sees `path` can connect: a client is never refused by a
    socket file that exists but does not listen yet."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # in the same directory, and no longer than the name itself where it can be
    # (a unix socket's path has at most 107 bytes)
    staging = os.path.join(os.path.dirname(path), f".s{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(staging)
    try:
        sock.bind(staging)
        os.chmod(staging, 0o666)
        sock.listen(LISTEN_BACKLOG)
        os.replace(staging, path)
    except BaseException:
        sock.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)
        raise
    return sock


def process_cwd(pid: int) -> str | None:
    """The current directory of process `pid` (None when it cannot be read): what the
    kernel says, so a peer cannot claim a directory it is not in."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


class PeerCredProtocol(H11Protocol):
    """uvicorn's H11Protocol that tags every request with the peer's credentials and
    bounds the time its headers may take (see the module docstring)."""

    header_timeout_s = HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        cred = peer_cred(transport.get_extra_info("socket"))
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope[SCOPE_KEY] = cred
            await inner(scope, receive, send)

        self.app = app
        self._arm_header_timer()

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # this request's headers are in
            self._disarm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # the next request's headers are awaited

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.transport.write(_LATE % (len(_LATE_BODY), _LATE_BODY))
        self.transport.close()
