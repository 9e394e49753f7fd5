"""Config section for the HTTP listener beside the unix socket (`http:`): where it
listens (off unless named; loopback unless an administrator names another address)
and whether /metrics asks for a token too."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator

from podium.config.common import Closed


def split_listen(text: str) -> tuple[str, int]:
    """("host", port) of "HOST:PORT" or "[V6]:PORT". Raises ValueError (one line)
    saying what is wrong and what would be right."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r}: give HOST:PORT, e.g. 127.0.0.1:8686 or [::1]:8686")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise ValueError(
                f"{text!r}: the host must be an IP address (or localhost), e.g. 127.0.0.1"
            ) from None
    return host, int(port)


class HttpListener(Closed):
    """The daemon's HTTP listener: the REST API, /metrics and the dashboard over TCP,
    each request authenticated by a bearer token (`podium token create`)."""

    listen: str | None = Field(
        default=None, description="HOST:PORT to listen on (none: no HTTP listener)"
    )
    metrics_token: bool = Field(
        default=False, description="whether /metrics needs a token too (Prometheus' bearer)"
    )

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            split_listen(value)
        return value


__all__ = ["HttpListener", "split_listen"]
