"""Container images made offline for the tests: layers as tar streams, an image's
config, OCI image layouts, `docker save` archives, pushing to a registry, and a small
registry of the tests' own that speaks the Docker Registry API v2's token flow.

Nothing here is a stand-in for what is tested: the layouts and archives follow the
OCI image and Docker formats, and `RegistryServer` answers as registries do (401 and
a Bearer challenge, a token realm, blob redirects) so that the client's side of the
protocol is exercised for real; a second test runs against Debian's docker-registry.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import tarfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BUSYBOX = shutil.which("busybox")
APPLETS = ("sh", "id", "cat", "ls", "echo", "env", "pwd", "sleep", "test", "[")
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


@dataclass(frozen=True)
class Entry:
    """One member of a layer: a file (`data`), dir, symlink or hard link (`target`),
    fifo or char device."""

    name: str
    kind: str = "file"
    data: bytes = b""
    target: str = ""
    mode: int = 0o644


def layer(entries: Iterable[Entry], compress: bool = True) -> bytes:
    """A layer: a tar stream of `entries` in order, gzipped unless `compress` is off."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for e in entries:
            info = tarfile.TarInfo(e.name)
            info.mode, info.mtime = e.mode, 1_700_000_000
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
            elif e.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, e.target
            elif e.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, e.target
            elif e.kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif e.kind == "char":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            else:
                info.size = len(e.data)
                tar.addfile(info, io.BytesIO(e.data))
                continue
            tar.addfile(info)
    data = raw.getvalue()
    return gzip.compress(data, mtime=0) if compress else data


def busybox_layer(marker: str = "inside-the-image") -> bytes:
    """A base layer: busybox-static with its applets, /marker, a few directories."""
    assert BUSYBOX is not None
    entries = [Entry(d, "dir", mode=0o755) for d in ("bin", "etc", "tmp", "proc", "sys", "dev")]
    entries.append(Entry("bin/busybox", data=Path(BUSYBOX).read_bytes(), mode=0o755))
    entries += [Entry(f"bin/{a}", "symlink", target="busybox") for a in APPLETS]
    entries.append(Entry("marker", data=f"{marker}\n".encode()))
    return layer(entries)


def config(arch: str = "amd64", **inner: Any) -> dict[str, Any]:
    """An image config (OCI), `inner` its `config` (Env, Entrypoint, Cmd, ...)."""
    return {"architecture": arch, "os": "linux", "config": inner,
            "rootfs": {"type": "layers", "diff_ids": []}}  # fmt: skip


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass
class Built:
    """An image's blobs by digest, its manifest (bytes) and the manifest's digest."""

    blobs: dict[str, bytes] = field(default_factory=dict)
    manifest: bytes = b""
    digest: str = ""


def build(layers: list[bytes], cfg: dict[str, Any]) -> Built:
    """The blobs and OCI manifest of an image of `layers` (lowest first) and `cfg`."""
    out = Built()
    cfg = dict(cfg, rootfs={"type": "layers", "diff_ids": [
        digest_of(gzip.decompress(d) if d[:2] == b"\x1f\x8b" else d) for d in layers
    ]})  # fmt: skip
    cfg_bytes = json.dumps(cfg).encode()
    out.blobs[digest_of(cfg_bytes)] = cfg_bytes
    descs = []
    for data in layers:
        out.blobs[digest_of(data)] = data
        descs.append({"mediaType": OCI_LAYER, "digest": digest_of(data), "size": len(data)})
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": digest_of(cfg_bytes), "size": len(cfg_bytes)},
        "layers": descs,
    }
    out.manifest = json.dumps(manifest).encode()
    out.digest = digest_of(out.manifest)
    return out


def oci_layout(path: Path, image: Built, ref: str = "latest") -> Path:
    """`image` as an OCI image layout directory at `path`, its manifest named `ref`."""
    blobs = path / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    for digest, data in {**image.blobs, image.digest: image.manifest}.items():
        (blobs / digest.removeprefix("sha256:")).write_bytes(data)
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": OCI_MANIFEST,
                "digest": image.digest,
                "size": len(image.manifest),
                "annotations": {"org.opencontainers.image.ref.name": ref},
            }
        ],
    }
    (path / "index.json").write_text(json.dumps(index))
    return path


def docker_archive(path: Path, layers: list[bytes], cfg: dict[str, Any], tag: str) -> Path:
    """A `docker save` archive at `path`: its layers uncompressed, as Docker writes them."""
    cfg_bytes = json.dumps(cfg).encode()
    names = []
    with tarfile.open(path, "w") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for data in layers:
            plain = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
            name = f"{hashlib.sha256(plain).hexdigest()}/layer.tar"
            add(name, plain)
            names.append(name)
        config_name = f"{hashlib.sha256(cfg_bytes).hexdigest()}.json"
        add(config_name, cfg_bytes)
        add("manifest.json", json.dumps([{"Config": config_name, "RepoTags": [tag],
                                          "Layers": names}]).encode())  # fmt: skip
    return path


def push(registry: str, repository: str, tag: str, image: Built) -> None:
    """Push `image` to a registry at http://`registry` (the API's monolithic upload)."""
    for digest, data in image.blobs.items():
        conn = http.client.HTTPConnection(registry, timeout=30)
        conn.request("POST", f"/v2/{repository}/blobs/uploads/")
        reply = conn.getresponse()
        reply.read()
        assert reply.status == 202, reply.status
        location = reply.headers["Location"]
        sep = "&" if "?" in location else "?"
        conn.request("PUT", f"{location}{sep}digest={digest}", body=data,
                     headers={"Content-Type": "application/octet-stream"})  # fmt: skip
        reply = conn.getresponse()
        reply.read()
        assert reply.status == 201, (reply.status, digest)
        conn.close()
    conn = http.client.HTTPConnection(registry, timeout=30)
    conn.request("PUT", f"/v2/{repository}/manifests/{tag}", body=image.manifest,
                 headers={"Content-Type": OCI_MANIFEST})  # fmt: skip
    reply = conn.getresponse()
    reply.read()
    assert reply.status == 201, reply.status
    conn.close()


class RegistryServer:
    """A registry on 127.0.0.1 serving `images` ({(repository, reference): Built},
    plus index documents in `indexes`) behind the token flow: a request without a
    valid Bearer token gets 401 with a challenge naming /token as the realm; with
    `login`, the token service wants that user and password (Basic). Blobs are served
    by a redirect to another host name of the same server (localhost), which must not
    be sent the registry's token. `seen` records (method, path, had_authorization)."""

    TOKEN = "test-token-42"

    def __init__(self, login: tuple[str, str] | None = None) -> None:
        self.images: dict[tuple[str, str], Built] = {}
        self.indexes: dict[tuple[str, str], bytes] = {}
        self.login = login
        self.seen: list[tuple[str, str, bool]] = []
        self.corrupt: set[str] = set()  # digests served with one byte changed
        self.slow_s = 0.0  # how long each blob takes to start coming
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                return

            def do_GET(self) -> None:
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def add(self, repository: str, tag: str, image: Built) -> None:
        self.images[(repository, tag)] = image
        self.images[(repository, image.digest)] = image

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        path = req.path
        auth = req.headers.get("Authorization") or ""
        self.seen.append(("GET", path, bool(auth)))
        if path.startswith("/token"):
            if self.login is not None:
                expected = "Basic " + base64.b64encode(":".join(self.login).encode()).decode()
                if auth != expected:
                    return self._send(req, 401, b'{"errors": [{"code": "DENIED"}]}')
            return self._send(req, 200, json.dumps({"token": self.TOKEN}).encode())
        if path.startswith("/cdn/"):
            time.sleep(self.slow_s)
            digest = path.removeprefix("/cdn/")
            data = self._blob(digest)
            if auth or data is None:  # the registry's token must not reach another host
                return self._send(req, 403 if auth else 404, b"{}")
            return self._send(req, 200, data, "application/octet-stream")
        if auth != f"Bearer {self.TOKEN}":
            realm = f"http://{self.address}/token"
            req.send_response(401)
            req.send_header(
                "WWW-Authenticate", f'Bearer realm="{realm}",service="test",scope="pull"'
            )
            req.send_header("Content-Length", "2")
            req.end_headers()
            req.wfile.write(b"{}")
            return None
        parts = path.split("/")
        if len(parts) >= 5 and parts[1] == "v2" and parts[-2] in ("manifests", "blobs"):
            repository, kind, ref = "/".join(parts[2:-2]), parts[-2], parts[-1]
            if kind == "manifests":
                if (repository, ref) in self.indexes:
                    return self._send(req, 200, self.indexes[(repository, ref)], OCI_INDEX)
                image = self.images.get((repository, ref))
                if image is None:
                    body = (
                        b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}'
                    )
                    return self._send(req, 404, body)
                return self._send(req, 200, image.manifest, OCI_MANIFEST)
            req.send_response(307)
            req.send_header("Location", f"http://localhost:{self.port}/cdn/{ref}")
            req.send_header("Content-Length", "0")
            req.end_headers()
            return None
        return self._send(req, 404, b"{}")

    def _blob(self, digest: str) -> bytes | None:
        for image in self.images.values():
            if digest in image.blobs:
                data = image.blobs[digest]
                if digest in self.corrupt:
                    data = bytes([data[0] ^ 1]) + data[1:]
                return data
        return None

    @staticmethod
    def _send(
        req: BaseHTTPRequestHandler, status: int, body: bytes, kind: str = "application/json"
    ) -> None:
        req.send_response(status)
        req.send_header("Content-Type", kind)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)


def index(images: dict[str, Built]) -> bytes:
    """An image index of one manifest per architecture ({"amd64": Built, ...})."""
    return json.dumps({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": b.digest, "size": len(b.manifest),
                       "platform": {"os": "linux", "architecture": arch}}
                      for arch, b in images.items()],
    }).encode()  # fmt: skip


def env_for_cache(tmp: Path) -> dict[str, str]:
    """Environment that puts an import's cache in `tmp` and allows loopback HTTP."""
    return dict(os.environ, PODIUM_IMAGE_CACHE=str(tmp / "cache"))
