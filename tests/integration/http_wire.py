"""HTTP/1.1 on a Unix socket, as test proxies in front of the daemon read it."""

from __future__ import annotations

import socket


def read_message(sock: socket.socket) -> bytes:
    """One whole request or answer (headers and its Content-Length body) from `sock`;
    what came before the peer closed, or b"", when it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body
