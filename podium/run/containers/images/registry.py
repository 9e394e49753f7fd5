"""A client of the Docker Registry HTTP API v2 (the OCI distribution spec), with the
token flow registries use (Docker Hub, nvcr.io, GHCR, the `registry` server).

A request that gets 401 with `WWW-Authenticate: Bearer realm=...,service=...,scope=...`
asks the realm for a token (with the user's credentials when the reference names a
user) and is made again with it; `Basic realm=...` is answered with the credentials.
Credentials come from a netrc file, as enroot reads them: `$PODIUM_CREDENTIALS`, else
`$XDG_CONFIG_HOME/podium/credentials`, else enroot's `$ENROOT_CONFIG_PATH/.credentials`
(`machine nvcr.io login $oauthtoken password KEY`).

HTTPS only, except for a registry on this machine's loopback (the way Docker treats
localhost registries) or with PODIUM_ALLOW_HTTP=yes (enroot's ENROOT_ALLOW_HTTP).
Redirects are followed (blobs often live on another host); the credentials are never
sent to another host. Every blob is checked against its digest as it is written.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import ipaddress
import json
import netrc
import os
import re
import ssl
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from podium.run.containers.images.reference import ImageError, Source

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
ACCEPT = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))
MAX_DOCUMENT = 4 << 20  # a manifest or config bigger than this is refused
CHUNK = 1 << 20
TIMEOUT_S = float(os.environ.get("PODIUM_CONNECT_TIMEOUT", "30"))
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


def credentials_file() -> str | None:
    """The netrc file that holds registry credentials, if there is one."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    enroot = os.environ.get("ENROOT_CONFIG_PATH") or os.path.join(config, "enroot")
    for path in (
        os.environ.get("PODIUM_CREDENTIALS"),
        os.path.join(config, "podium", "credentials"),
        os.path.join(enroot, ".credentials"),
    ):
        if path and os.path.isfile(path):
            return path
    return None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class Response:
    status: int
    headers: http.client.HTTPMessage
    body: http.client.HTTPResponse
    url: str
    conn: http.client.HTTPConnection = field(repr=False)

    def close(self) -> None:
        self.body.close()
        self.conn.close()


class Registry:
    """One registry, one repository: manifests, configs and blobs of `source`."""

    def __init__(self, source: Source) -> None:
        self.source = source
        host = source.registry.rsplit(":", 1)[0] if "]" not in source.registry else source.registry
        plain = os.environ.get("PODIUM_ALLOW_HTTP", "").lower() in ("y", "yes", "1", "true")
        self.scheme = "http" if plain or _loopback(host) else "https"
        self.base = f"{self.scheme}://{source.registry}/v2/{source.repository}"
        self._auth: dict[str, str] = {}  # host -> Authorization header value
        self._login = self._credentials()

    def _credentials(self) -> tuple[str, str] | None:
        user = self.source.user
        if user is None:
            return None
        path = credentials_file()
        if path is not None:
            try:
                table = netrc.netrc(path)
            except (netrc.NetrcParseError, OSError) as exc:
                raise ImageError(f"registry credentials in {path}: {exc}") from None
            for host in (self.source.registry, self.source.registry.split(":")[0]):
                found = table.authenticators(host)
                if found and found[0] == user:
                    return user, found[2] or ""
            for login, _, secret in table.hosts.values():
                if login == user:
                    return user, secret or ""
        password = os.environ.get("PODIUM_REGISTRY_PASSWORD")
        if password is None:
            raise ImageError(
                f"{self.source.text}: no password for {user}: put `machine "
                f"{self.source.registry} login {user} password ...` in "
                "~/.config/podium/credentials (or set PODIUM_REGISTRY_PASSWORD)"
            )
        return user, password

    # -- HTTP -------------------------------------------------------------------------

    def _send(self, method: str, url: str, headers: dict[str, str]) -> Response:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https":
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                parts.netloc, timeout=TIMEOUT_S, context=ssl.create_default_context()
            )
        elif parts.scheme == "http" and self.scheme == "http":
            conn = http.client.HTTPConnection(parts.netloc, timeout=TIMEOUT_S)
        else:
            raise ImageError(f"{self.source.text}: refusing to follow {parts.scheme}:// ({url})")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        try:
            conn.request(method, path, headers={"User-Agent": "podium", **headers})
            reply = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ImageError(f"{self.source.text}: cannot reach {parts.netloc}: {exc}") from None
        return Response(reply.status, reply.headers, reply, url, conn)

    def get(self, url: str, accept: str | None = None) -> Response:
        """GET `url`, answering an auth challenge once and following redirects; the
        response is 200 or ImageError is raised with the registry's words."""
        headers = {"Accept": accept} if accept else {}
        challenged = False
        for _ in range(8):
            host = urllib.parse.urlsplit(url).netloc
            sent = dict(headers)
            if host in self._auth:
                sent["Authorization"] = self._auth[host]
            reply = self._send("GET", url, sent)
            if reply.status in (301, 302, 303, 307, 308):
                location = reply.headers.get("Location") or ""
                reply.close()
                url = urllib.parse.urljoin(url, location)
                continue
            if reply.status == 401 and not challenged:
                challenged = True
                challenge = reply.headers.get("WWW-Authenticate") or ""
                reply.close()
                self._auth[host] = self._authorize(challenge)
                continue
            if reply.status != 200:
                why = _error_text(reply)
                reply.close()
                raise ImageError(f"{self.source.text}: {why}")
            return reply
        raise ImageError(f"{self.source.text}: too many redirects from the registry")

    def _authorize(self, challenge: str) -> str:
        """The Authorization header that answers `challenge` (WWW-Authenticate)."""
        kind, _, params = challenge.partition(" ")
        if kind.lower() == "basic":
            if self._login is None:
                raise ImageError(
                    f"{self.source.text}: the registry wants a login: name it "
                    "(USER@REGISTRY#IMAGE) and put its password in ~/.config/podium/credentials"
                )
            return "Basic " + base64.b64encode(":".join(self._login).encode()).decode()
        if kind.lower() != "bearer":
            raise ImageError(f"{self.source.text}: unsupported authentication {kind!r}")
        fields = dict(_CHALLENGE.findall(params))
        realm = fields.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise ImageError(f"{self.source.text}: the registry's token realm {realm!r} is no URL")
        query = urllib.parse.urlencode(
            {k: v for k, v in fields.items() if k in ("service", "scope")}
        )
        url = f"{realm}{'&' if '?' in realm else '?'}{query}"
        parts = urllib.parse.urlsplit(url)
        headers = {}
        if self._login is not None:
            token = base64.b64encode(":".join(self._login).encode()).decode()
            headers["Authorization"] = f"Basic {token}"
        reply = self._send("GET", url, headers)
        try:
            if reply.status != 200:
                raise ImageError(
                    f"{self.source.text}: the token service {parts.netloc} refused: "
                    f"{_error_text(reply)}"
                )
            data = _json(reply.body.read(MAX_DOCUMENT + 1), "token")
        finally:
            reply.close()
        bearer = data.get("token") or data.get("access_token")
        if not isinstance(bearer, str) or not bearer:
            raise ImageError(f"{self.source.text}: the token service gave no token")
        return f"Bearer {bearer}"

    # -- the API ------------------------------------------------------------------------

    def document(self, url: str, accept: str | None = None) -> tuple[dict[str, Any], str, bytes]:
        """A JSON document (manifest, index, config): it, its media type and its bytes."""
        reply = self.get(url, accept)
        try:
            raw = reply.body.read(MAX_DOCUMENT + 1)
            kind = (reply.headers.get("Content-Type") or "").split(";")[0].strip()
        finally:
            reply.close()
        data = _json(raw, url)
        return data, str(data.get("mediaType") or kind), raw

    def manifest(self, reference: str) -> tuple[dict[str, Any], str, bytes]:
        return self.document(f"{self.base}/manifests/{reference}", ACCEPT)

    def blob(self, digest: str, write: Callable[[bytes], object], size: int | None) -> None:
        """Stream blob `digest` into `write`, checking its size and sha256 digest as it
        comes; raises ImageError on a mismatch (nothing is trusted before the check)."""
        if not re.fullmatch(r"sha256:[a-f0-9]{64}", digest):
            raise ImageError(f"{self.source.text}: unsupported digest {digest!r}")
        reply = self.get(f"{self.base}/blobs/{digest}")
        try:
            check_digest(_chunks(reply.body), digest, size, write, self.source.text)
        finally:
            reply.close()


def _chunks(stream: BinaryIO | http.client.HTTPResponse) -> Iterator[bytes]:
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return
        yield chunk


def check_digest(
    chunks: Iterator[bytes],
    digest: str,
    size: int | None,
    write: Callable[[bytes], object],
    what: str,
) -> None:
    """Pass `chunks` to `write`, and raise ImageError unless they are `size` bytes
    (when known) whose sha256 is `digest`."""
    hasher = hashlib.sha256()
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if size is not None and total > size:
            raise ImageError(f"{what}: blob {digest[:19]} is bigger than its manifest says")
        hasher.update(chunk)
        write(chunk)
    if size is not None and total != size:
        raise ImageError(f"{what}: blob {digest[:19]} is {total} bytes, not {size}")
    if f"sha256:{hasher.hexdigest()}" != digest:
        raise ImageError(f"{what}: blob {digest[:19]} does not match its digest")


def _json(raw: bytes, what: str) -> dict[str, Any]:
    if len(raw) > MAX_DOCUMENT:
        raise ImageError(f"{what}: the document is over {MAX_DOCUMENT >> 20} MiB")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ImageError(f"{what}: not JSON") from None
    if not isinstance(data, dict):
        raise ImageError(f"{what}: not a JSON object")
    return data


def _error_text(reply: Response) -> str:
    """The registry's error, in one line: its first error code and message, or the
    HTTP status."""
    try:
        data = json.loads(reply.body.read(65536) or b"{}")
        errors = data.get("errors") if isinstance(data, dict) else None
        if errors and isinstance(errors[0], dict):
            first = errors[0]
            text = f"{first.get('code', '')} {first.get('message', '')}".strip()
            return f"{text} (HTTP {reply.status})"[:300].replace("\n", " ")
    except (ValueError, OSError, http.client.HTTPException):
        pass
    return f"HTTP {reply.status} {reply.body.reason}"


__all__ = ["ACCEPT", "INDEX_TYPES", "MANIFEST_TYPES", "Registry", "check_digest"]
