"""Images on disk and what every source resolves to: an `Image` (its config and its
layers, each opened as a fresh stream), read from an OCI image layout directory or a
`docker save` archive; and the choice of one platform's manifest from an index."""

from __future__ import annotations

import json
import os
import platform
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from podium.run.containers.images.reference import ImageError, Source

ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le"}
ARCHITECTURES |= {"s390x": "s390x", "riscv64": "riscv64", "i686": "386"}
MAX_DOCUMENT = 4 << 20


def host_architecture() -> str:
    """This machine's architecture in OCI's words (amd64, arm64, ...)."""
    machine = platform.machine()
    return ARCHITECTURES.get(machine, machine)


@dataclass(frozen=True)
class Layer:
    """One layer: its digest (empty when the source has none), media type, size, and
    how to open it (a new stream of its tar, maybe compressed, on each call)."""

    digest: str
    media_type: str
    size: int | None
    open: Callable[[], IO[bytes]]


@dataclass(frozen=True)
class Image:
    """What an import turns into a root tree: the image config and its layers, lowest
    first; `digest` names the manifest where the source has one."""

    config: dict[str, Any]
    layers: tuple[Layer, ...]
    digest: str = ""
    close: Callable[[], None] = lambda: None  # what the layers read from, let go


def file_layer(digest: str, media_type: str, size: object, path: str) -> Layer:
    """A layer kept in the file at `path` (`size` as a descriptor gives it)."""

    def opener() -> IO[bytes]:
        return open(path, "rb")

    return Layer(digest, media_type, size if isinstance(size, int) else None, opener)


def pick_platform(index: dict[str, Any], arch: str, what: str) -> dict[str, Any]:
    """The descriptor in an image index (manifest list) for linux/`arch`; raises
    ImageError naming the platforms the image has."""
    manifests = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
    offered = []
    for m in manifests:
        plat = m.get("platform") or {}
        offered.append(f"{plat.get('os', '?')}/{plat.get('architecture', '?')}")
        if plat.get("os", "linux") == "linux" and plat.get("architecture") == arch:
            return m
    if not offered:
        raise ImageError(f"{what}: the image index lists no manifest")
    raise ImageError(
        f"{what}: no linux/{arch} image (it has {', '.join(sorted(set(offered)))}); "
        "pass --arch to import another architecture"
    )


def check_architecture(config: dict[str, Any], arch: str, what: str) -> None:
    """Refuse an image built for another architecture (it would not run here)."""
    built = config.get("architecture")
    if built and built != arch:
        raise ImageError(
            f"{what}: the image is for {config.get('os', 'linux')}/{built}, not linux/{arch}; "
            "pass --arch to import it anyway"
        )


def _document(raw: bytes, what: str) -> dict[str, Any]:
    if len(raw) > MAX_DOCUMENT:
        raise ImageError(f"{what}: over {MAX_DOCUMENT >> 20} MiB")
    try:
        data = json.loads(raw)
    except ValueError:
        raise ImageError(f"{what}: not JSON") from None
    if not isinstance(data, (dict, list)):
        raise ImageError(f"{what}: not a JSON document")
    return data if isinstance(data, dict) else {"list": data}


def _blob_path(layout: str, digest: str, what: str) -> str:
    algorithm, _, hexa = str(digest).partition(":")
    if algorithm != "sha256" or len(hexa) != 64 or not all(c in "0123456789abcdef" for c in hexa):
        raise ImageError(f"{what}: unsupported digest {digest!r}")
    return os.path.join(layout, "blobs", algorithm, hexa)


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_DOCUMENT + 1)
    except OSError as exc:
        raise ImageError(f"{what}: {exc.strerror}: {path}") from None


def oci_layout(source: Source, arch: str) -> Image:
    """The image of an OCI image layout directory (`oci:PATH[:REF]`): the manifest its
    index names REF (org.opencontainers.image.ref.name), or its only one."""
    root, what = source.path, source.text
    if not os.path.isfile(os.path.join(root, "oci-layout")):
        raise ImageError(f"{what}: {root} is not an OCI image layout (no oci-layout file)")
    index = _document(_read(os.path.join(root, "index.json"), what), what)
    manifests = [m for m in index.get("manifests") or [] if isinstance(m, dict)]
    if source.reference:
        manifests = [
            m
            for m in manifests
            if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name")
            in (source.reference, source.reference.rsplit(":", 1)[-1])
        ]
    if len(manifests) != 1:
        names = ", ".join(
            str((m.get("annotations") or {}).get("org.opencontainers.image.ref.name", "?"))
            for m in index.get("manifests") or []
            if isinstance(m, dict)
        )
        which = f"no image named {source.reference!r}" if source.reference else "several images"
        raise ImageError(f"{what}: {which} in the layout (it has: {names or 'none'})")
    descriptor = manifests[0]
    manifest = _document(_read(_blob_path(root, descriptor.get("digest", ""), what), what), what)
    if manifest.get("manifests"):  # an index: one platform's manifest
        descriptor = pick_platform(manifest, arch, what)
        path = _blob_path(root, descriptor.get("digest", ""), what)
        manifest = _document(_read(path, what), what)
    config_desc = manifest.get("config") or {}
    config = _document(_read(_blob_path(root, config_desc.get("digest", ""), what), what), what)
    check_architecture(config, arch, what)
    layers = []
    for desc in manifest.get("layers") or []:
        path = _blob_path(root, desc.get("digest", ""), what)
        if not os.path.isfile(path):
            raise ImageError(f"{what}: layer {desc.get('digest', '')[:19]} is missing from {root}")
        media = str(desc.get("mediaType", ""))
        layers.append(file_layer(str(desc["digest"]), media, desc.get("size"), path))
    return Image(config, tuple(layers), str(descriptor.get("digest", "")))


def docker_archive(source: Source, arch: str) -> Image:
    """The image of a `docker save` archive (`docker-archive:PATH[:IMAGE[:TAG]]`): the
    entry of its manifest.json tagged IMAGE[:TAG], or its only one. The archive stays
    open for its layers until the image's `close()`."""
    what = source.text
    try:
        archive = tarfile.open(source.path, "r:")  # noqa: SIM115 (closed by Image.close)
    except (OSError, tarfile.TarError) as exc:
        raise ImageError(f"{what}: not a docker-archive you can read: {exc}") from None
    try:
        return _saved_image(archive, source, arch)
    except BaseException:
        archive.close()
        raise


def _saved_image(archive: tarfile.TarFile, source: Source, arch: str) -> Image:
    what = source.text
    members = {m.name.removeprefix("./"): m for m in archive.getmembers() if m.isfile()}

    def read(name: str) -> bytes:
        member = members.get(name.removeprefix("./"))
        stream = archive.extractfile(member) if member is not None else None
        if stream is None:
            raise ImageError(f"{what}: {name} is missing from the archive")
        return stream.read(MAX_DOCUMENT + 1)

    entries = _document(read("manifest.json"), what).get("list") or []
    entries = [e for e in entries if isinstance(e, dict)]
    if source.reference:
        wanted = {source.reference, f"{source.reference}:latest"}
        entries = [e for e in entries if wanted & set(e.get("RepoTags") or [])]
    if len(entries) != 1:
        tags = ", ".join(t for e in entries for t in e.get("RepoTags") or []) or "none"
        raise ImageError(f"{what}: name one image of the archive (it has: {tags})")
    entry = entries[0]
    config = _document(read(str(entry.get("Config", ""))), what)
    check_architecture(config, arch, what)
    layers = []
    for name in entry.get("Layers") or []:
        member = members.get(str(name).removeprefix("./"))
        if member is None:
            raise ImageError(f"{what}: layer {name} is missing from the archive")
        layers.append(Layer("", "", member.size, _member(archive, member, what)))
    return Image(config, tuple(layers), close=archive.close)


def _member(
    archive: tarfile.TarFile, member: tarfile.TarInfo, what: str
) -> Callable[[], IO[bytes]]:
    """An opener of one member of `archive` (a layer saved inside it)."""

    def opener() -> IO[bytes]:
        stream = archive.extractfile(member)
        if stream is None:
            raise ImageError(f"{what}: {member.name} is not a file")
        return stream

    return opener


__all__ = [
    "Image",
    "Layer",
    "check_architecture",
    "docker_archive",
    "file_layer",
    "host_architecture",
    "oci_layout",
    "pick_platform",
]
