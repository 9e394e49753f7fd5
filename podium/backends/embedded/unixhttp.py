"""The little HTTP/1.1 the embedded client speaks to its daemon over a unix socket (or
over TCP to its HTTP listener): keep-alive, Content-Length or chunked bodies, and query
strings, on the C `_socket` module (standard library only, and no `socket`, `typing` or
`urllib`: the client's lean path loads none of them; see podium.cli.main)."""

from __future__ import annotations

import _socket

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def query_string(params: Mapping[str, Any]) -> str:
    """`params` as an URL query (RFC 3986 percent-encoding of UTF-8; what
    urllib.parse.urlencode gives for text, without loading urllib)."""

    def quote(text: str) -> str:
        if all(c in _UNRESERVED for c in text):
            return text
        return "".join(
            chr(b) if chr(b) in _UNRESERVED else f"%{b:02X}" for b in text.encode("utf-8")
        )

    return "&".join(f"{quote(str(k))}={quote(str(v))}" for k, v in params.items())


class ClosedEarly(ConnectionError):
    """The daemon closed the connection before a whole answer."""


class Response:
    """An answer: status, headers (lower-case names) and body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def getheader(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)


class _Reader:
    """Buffered reads of lines and byte counts from a socket (what `makefile("rb")`
    gives, without the socket module)."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def readline(self, limit: int) -> bytes:
        """One line with its newline, at most `limit` bytes (less at end of stream)."""
        while b"\n" not in self.buffer[:limit] and len(self.buffer) < limit and self._fill():
            pass
        end = self.buffer.find(b"\n", 0, limit)
        cut = end + 1 if end >= 0 else min(limit, len(self.buffer))
        line, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return line

    def read(self, size: int) -> bytes:
        """`size` bytes (less at end of stream). Chunks are joined once: a listing of
        10,000 jobs is megabytes, and growing one buffer chunk by chunk is quadratic."""
        chunks, have = [self.buffer], len(self.buffer)
        while have < size:
            chunk = self.sock.recv(max(65536, min(size - have, 1 << 22)))
            if not chunk:
                break
            chunks.append(chunk)
            have += len(chunk)
        data = b"".join(chunks) if len(chunks) > 1 else self.buffer
        self.buffer = data[size:]
        return data[:size]


class TlsFailed(ConnectionError):
    """The TLS handshake with the daemon's listener failed (its certificate untrusted,
    or it does not speak TLS): asking again will not help."""


class NotListening(FileNotFoundError):
    """Nothing listens at the daemon's TCP address (as a missing socket file is for the
    unix socket: no daemon there, not one restarting)."""


class UnixConnection:
    """One keep-alive HTTP/1.1 connection to the daemon's unix socket (the C `_socket`
    module: `socket` would load enum and selectors on the lean path)."""

    host = "podium"

    def __init__(self, path: str, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self.sock: _socket.socket | None = None
        self.reader: _Reader | None = None

    def _connect(self) -> _socket.socket:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        return sock

    def request(
        self, method: str, target: str, body: bytes | None, headers: dict[str, str]
    ) -> Response:
        if self.sock is None:
            sock = self._connect()
            self.sock, self.reader = sock, _Reader(sock)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        lines.append(f"Content-Length: {len(body or b'')}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b""))
        assert self.reader is not None
        return self._response(self.reader)

    def _response(self, reader: _Reader) -> Response:
        status_line = reader.readline(65537)
        if not status_line:
            raise ClosedEarly("no answer")
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ClosedEarly(f"not an HTTP answer: {status_line[:80]!r}")
        headers: dict[str, str] = {}
        while True:
            line = reader.readline(65537)
            if not line:
                raise ClosedEarly("headers cut off")
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._chunked(reader)
        else:
            length = int(headers.get("content-length", "0"))
            body = reader.read(length)
            if len(body) < length:
                raise ClosedEarly("body cut off")
        if headers.get("connection", "").lower() == "close":
            self.close()
        return Response(int(parts[1]), headers, body)

    @staticmethod
    def _chunked(reader: _Reader) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int(reader.readline(65537).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunk = reader.read(size + 2)
            if len(chunk) < size + 2:
                raise ClosedEarly("chunk cut off")
            chunks.append(chunk[:size])

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.reader = None


class TcpConnection(UnixConnection):
    """The same, to the daemon's HTTP listener at (host, port); with `tls`, over TLS,
    the certificate checked against the system's CAs (or $SSL_CERT_FILE's) and the host
    name (the `ssl` module is loaded only then)."""

    def __init__(self, host: str, port: int, timeout: float, tls: bool = False) -> None:
        super().__init__(f"{host}:{port}", timeout)
        self.address = (host, port)
        self.tls = tls
        self.host = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def _connect(self) -> _socket.socket:
        family = _socket.AF_INET6 if ":" in self.address[0] else _socket.AF_INET
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.address)
        except ConnectionRefusedError:
            sock.close()
            raise NotListening(f"nothing listens at {self.path}") from None
        except OSError:
            sock.close()
            raise
        if not self.tls:
            return sock
        import socket as socket_module
        import ssl

        plain = socket_module.socket(family, _socket.SOCK_STREAM, fileno=sock.detach())
        try:
            return ssl.create_default_context().wrap_socket(plain, server_hostname=self.address[0])
        except ssl.SSLError as exc:
            plain.close()
            raise TlsFailed(
                f"TLS with {self.path} failed: {exc.reason or exc} (a certificate this "
                "machine does not trust? SSL_CERT_FILE may name its CA)"
            ) from None
        except OSError:
            plain.close()
            raise


def split_url(url: str) -> tuple[str, int, bool]:
    """(host, port, over TLS) of "http://HOST:PORT[/]" or "https://..." (no urllib on
    the lean path). Raises ValueError (one line) for anything else."""
    tls = url.startswith("https://")
    rest = url.removeprefix("https://" if tls else "http://").rstrip("/")
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if (
        not (tls or url.startswith("http://"))
        or not sep
        or not host
        or "/" in rest
        or not (port.isdigit() and 0 < int(port) < 65536)
    ):
        raise ValueError(
            f"PODIUM_URL={url!r}: give http://HOST:PORT or https://HOST:PORT, e.g. "
            "http://127.0.0.1:8686 (plain HTTP: keep the listener on loopback, or reach it "
            "by an SSH tunnel; HTTPS when http.tls_cert is set)"
        )
    return host, int(port), tls


__all__ = [
    "ClosedEarly",
    "NotListening",
    "TcpConnection",
    "TlsFailed",
    "UnixConnection",
    "query_string",
    "split_url",
]
