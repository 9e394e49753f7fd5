"""Config section for the HTTP listener beside the unix socket (`http:`): where it
listens (off unless named; loopback unless an administrator names another address),
with TLS or not, the names it answers to, whether /metrics asks for a token too, how
long a dashboard login lasts and how many tokens a user may hold."""

from __future__ import annotations

import ipaddress

from pydantic import Field, field_validator, model_validator

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
    tls_cert: str | None = Field(
        default=None, description="PEM certificate chain: serve HTTPS (with tls_key)"
    )
    tls_key: str | None = Field(default=None, description="its unencrypted PEM private key")
    host_names: list[str] = Field(
        default_factory=list,
        description="DNS names the listener answers to besides its address and localhost "
        "(a Host header naming any other is refused: DNS rebinding)",
    )
    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 30, description="how long a dashboard login lasts"
    )
    max_tokens_per_user: int = Field(
        default=100,
        ge=1,
        le=100_000,
        description="tokens one user may hold at once (expired ones for 10 minutes)",
    )

    @field_validator("host_names")
    @classmethod
    def _host_names(cls, names: list[str]) -> list[str]:
        for name in names:
            labels = name.split(".")
            if len(name) > 253 or not all(
                0 < len(label) <= 63 and label.replace("-", "").isalnum() and label.isascii()
                for label in labels
            ):
                raise ValueError(f"{name!r} is not a DNS name: give e.g. gpu-box.example.org")
        return [n.lower() for n in names]

    @model_validator(mode="after")
    def _tls_pair(self) -> HttpListener:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("give http.tls_cert and http.tls_key together (or neither)")
        return self

    @property
    def tls(self) -> bool:
        """Whether the listener serves HTTPS."""
        return self.tls_cert is not None

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str | None) -> str | None:
        if value is not None:
            split_listen(value)
        return value


__all__ = ["HttpListener", "split_listen"]
