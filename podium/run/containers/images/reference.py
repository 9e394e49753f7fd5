"""Where an image is imported from, as enroot and skopeo write it.

    docker://[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]   a registry (Docker Hub by default)
    [USER@][REGISTRY#]IMAGE[:TAG]                     the same, as Pyxis takes it
    dockerd://IMAGE[:TAG]                             the local Docker daemon's image
    podman://IMAGE[:TAG]                              the local podman store's image
    docker-archive:PATH[:IMAGE[:TAG]]                 a `docker save` archive
    oci:PATH[:REF]                                    an OCI image layout directory

Every part is checked against the characters its kind allows, so no user text
reaches a URL, a command line or a file name unchecked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "registry-1.docker.io"
_USER = r"[A-Za-z0-9$._-]+"
_REGISTRY = r"[A-Za-z0-9.-]+(?::[0-9]{1,5})?"
_NAME = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[a-f0-9]{64}"
_REMOTE = re.compile(
    rf"^(?:(?P<user>{_USER})@)?(?:(?P<registry>{_REGISTRY})#)?(?P<name>{_NAME})"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
_LOCAL = re.compile(rf"^(?P<name>{_NAME})(?::(?P<tag>{_TAG}))?$")
SCHEMES = ("docker://", "dockerd://", "podman://", "docker-archive:", "oci:")


class ImageError(ValueError):
    """An image cannot be imported: one line saying what is wrong and what would do."""


@dataclass(frozen=True)
class Source:
    """A parsed image source. `kind` is docker, dockerd, podman, docker-archive or oci;
    `registry`/`repository`/`reference` name a registry image (reference: a tag or a
    digest), `path` an archive or layout, `user` the registry login to use."""

    kind: str
    text: str
    registry: str = ""
    repository: str = ""
    reference: str = "latest"
    user: str | None = None
    path: str = ""

    @property
    def name(self) -> str:
        """A file name for the imported image, as enroot makes one: the repository
        with '/' as '+', then '+TAG' ("nvidia+pytorch+24.07-py3"); for an archive or
        layout, the image it names, else its file name."""
        repository, tag = self.repository.removeprefix("library/"), self.reference
        if self.kind in ("docker-archive", "oci"):
            named, _, tagged = self.reference.rpartition(":")
            if named and "/" not in tagged:
                repository, tag = named, tagged
            elif "/" in self.reference or (self.kind == "docker-archive" and self.reference):
                repository, tag = self.reference, "latest"
            else:
                repository = self.path.rstrip("/").rsplit("/", 1)[-1]
        base = repository.replace("/", "+") or "image"
        text = f"{base}+{tag.replace(':', '-')}" if tag else base
        return "".join(c if c.isalnum() or c in "_.+-" else "_" for c in text)[:200]


def parse(text: str) -> Source:
    """The source `text` names; raises ImageError with the forms it could take."""
    if not text or not text.isprintable() or len(text) > 4096:
        raise ImageError(f"{text!r} is not an image source: expected one of {_forms()}")
    if text.startswith(("docker-archive:", "oci:")):
        kind, _, rest = text.partition(":")
        path, _, ref = rest.partition(":")
        if not path.startswith(("/", ".")) or "\0" in path:
            raise ImageError(f"{text}: expected {kind}:PATH[:REF] with an absolute or ./ path")
        if ref and not re.match(rf"^{_NAME}(?::{_TAG})?$|^{_TAG}$", ref):
            raise ImageError(f"{text}: {ref!r} is not an image name or tag")
        return Source(kind, text, path=path, reference=ref or "")
    for scheme in ("dockerd://", "podman://"):
        if text.startswith(scheme):
            match = _LOCAL.match(text[len(scheme) :])
            if not match:
                raise ImageError(f"{text}: expected {scheme}IMAGE[:TAG] (lower-case name)")
            return Source(
                scheme[:-3],
                text,
                repository=match["name"],
                reference=match["tag"] or "latest",
            )
    remote = text.removeprefix("docker://")
    if "://" in remote:
        raise ImageError(f"{text}: unknown scheme; expected one of {_forms()}")
    match = _REMOTE.match(remote)
    if not match:
        raise ImageError(
            f"{text} is not an image reference: expected [USER@][REGISTRY#]IMAGE[:TAG] "
            "with a lower-case IMAGE (e.g. nvcr.io#nvidia/pytorch:24.07-py3)"
        )
    registry = match["registry"] or DOCKER_HUB
    if registry in ("docker.io", "index.docker.io"):
        registry = DOCKER_HUB
    name = match["name"]
    if registry == DOCKER_HUB and "/" not in name:
        name = f"library/{name}"
    reference = match["digest"] or match["tag"] or "latest"
    return Source("docker", text, registry, name, reference, match["user"])


def _forms() -> str:
    return "docker://[USER@][REGISTRY#]IMAGE[:TAG], dockerd://, podman://, docker-archive:, oci:"


__all__ = ["DOCKER_HUB", "SCHEMES", "ImageError", "Source", "parse"]
