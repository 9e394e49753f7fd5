"""Caller identity from the unix socket's peer credentials (SO_PEERCRED).

`PeerCredProtocol` is uvicorn's h11 protocol with one addition: on each connection
it reads the peer's pid, uid and gid from the kernel and puts them in the ASGI scope
as scope["podium.peer"]. Nothing the client sends can change them.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

SCOPE_KEY = "podium.peer"


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
    makes its own): who may do what is decided by each peer's credentials."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o666)
    return sock


def process_cwd(pid: int) -> str | None:
    """The current directory of process `pid` (None when it cannot be read): what the
    kernel says, so a peer cannot claim a directory it is not in."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


class PeerCredProtocol(H11Protocol):
    """uvicorn's H11Protocol that tags every request with the peer's credentials."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        cred = peer_cred(transport.get_extra_info("socket"))
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope[SCOPE_KEY] = cred
            await inner(scope, receive, send)

        self.app = app
