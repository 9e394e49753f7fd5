"""A free TCP port on the loopback, for a job's or a step's torch rendezvous
(MASTER_PORT). The C socket module: `socket` costs a step's start-up ~7 ms."""

from __future__ import annotations

import _socket


def free_port() -> int:
    """A port no one listens on now (the kernel's pick; another process may take it
    before the job binds it, as with any such pick)."""
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
    finally:
        sock.close()
