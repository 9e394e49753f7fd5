"""`podium image import` (enroot import): an image from a registry, the local Docker or
podman store, a `docker save` archive or an OCI layout, made into a squashfs file
with mksquashfs and enroot's defaults (`-comp lzo -noD`, or $PODIUM_SQUASH_OPTIONS),
every file owned by root inside (`-all-root`), the image's config written as enroot
writes it (/etc/environment, /etc/rc, /etc/fstab).

Runs as the importing user; needs mksquashfs (Debian's squashfs-tools), and docker or
podman for those sources. `ensure()` is what a job's `--container-image=REFERENCE`
uses: the user's cached image, imported first if it is not there yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any

from podium.run.containers.images import archives, rootfs
from podium.run.containers.images.archives import Image
from podium.run.containers.images.cache import Cache
from podium.run.containers.images.reference import ImageError, Source, parse
from podium.run.containers.images.registry import INDEX_TYPES, Registry

SQUASH_DEFAULTS = "-comp lzo -noD"  # enroot's ENROOT_SQUASH_OPTIONS
ENGINES = {"dockerd": "docker", "podman": "podman"}


def from_registry(source: Source, arch: str, cache: Cache) -> Image:
    """The image at `source` in its registry, its blobs fetched into `cache` (those
    already there, checked when they were written, are not fetched again)."""
    registry = Registry(source)
    manifest, kind, raw = registry.manifest(source.reference)
    digest = f"sha256:{hashlib.sha256(raw).hexdigest()}"
    if kind in INDEX_TYPES or manifest.get("manifests"):
        chosen = archives.pick_platform(manifest, arch, source.text)
        manifest, kind, raw = registry.manifest(str(chosen.get("digest", "")))
        digest = f"sha256:{hashlib.sha256(raw).hexdigest()}"
    if manifest.get("schemaVersion") == 1:
        raise ImageError(f"{source.text}: a schema 1 manifest (too old): push it again with v2")
    config_desc = manifest.get("config") or {}
    config_path = fetch(registry, cache, config_desc)
    with open(config_path, "rb") as fh:
        try:
            config = json.loads(fh.read(4 << 20))
        except ValueError:
            raise ImageError(f"{source.text}: the image config is not JSON") from None
    if not isinstance(config, dict):
        raise ImageError(f"{source.text}: the image config is not a JSON object")
    archives.check_architecture(config, arch, source.text)
    layers = []
    for desc in manifest.get("layers") or []:
        path = fetch(registry, cache, desc)
        media = str(desc.get("mediaType", ""))
        layers.append(archives.file_layer(str(desc["digest"]), media, desc.get("size"), path))
    return Image(config, tuple(layers), digest)


def fetch(registry: Registry, cache: Cache, desc: dict[str, Any]) -> str:
    """Blob `desc` (a descriptor: digest, size) in `cache`, downloaded if missing."""
    digest = str(desc.get("digest", ""))
    size = desc.get("size")
    if not isinstance(size, int) or size < 0:
        size = None
    path = cache.blob(digest)
    if os.path.isfile(path) and (size is None or os.path.getsize(path) == size):
        cache.touch(path)
        return path
    fd, tmp = tempfile.mkstemp(dir=cache.work, prefix="blob-")
    try:
        with os.fdopen(fd, "wb") as out:
            registry.blob(digest, out.write, size)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def from_engine(source: Source, arch: str, work: str) -> Image:
    """The image in the local Docker daemon's (dockerd://) or podman's (podman://)
    store, saved as an archive by that engine first."""
    program = ENGINES[source.kind]
    if shutil.which(program) is None:
        raise ImageError(f"{source.text}: {program} is not installed here")
    archive = os.path.join(work, "saved.tar")
    ref = f"{source.repository}:{source.reference}"
    argv = [program, "save", "-o", archive, ref]
    if program == "podman":
        argv[2:2] = ["--format", "docker-archive"]
    done = subprocess.run(argv, capture_output=True, text=True, errors="replace", check=False)
    if done.returncode != 0:
        lines = [x for x in done.stderr.splitlines() if x.strip()]
        why = lines[-1].strip() if lines else f"exited {done.returncode}"
        raise ImageError(f"{source.text}: {program} save: {why}")
    return archives.docker_archive(Source("docker-archive", source.text, path=archive), arch)


def squash(root: str, output: str, pseudo: str) -> None:
    """mksquashfs `root` into `output` (replaced whole when it is done)."""
    if shutil.which("mksquashfs") is None:
        raise ImageError("mksquashfs is not installed: apt install squashfs-tools")
    options = shlex.split(os.environ.get("PODIUM_SQUASH_OPTIONS") or SQUASH_DEFAULTS)
    partial = f"{output}.partial-{os.getpid()}"
    argv = ["mksquashfs", root, partial, "-all-root", "-noappend", "-no-progress", "-quiet"]
    pseudo_file = None
    if pseudo:
        fd, pseudo_file = tempfile.mkstemp(prefix="podium-pseudo-", dir=os.path.dirname(root))
        with os.fdopen(fd, "w") as fh:
            fh.write(pseudo)
        argv += ["-pf", pseudo_file]
    try:
        done = subprocess.run(
            [*argv, *options], capture_output=True, text=True, errors="replace", check=False
        )
        if done.returncode != 0:
            lines = [x for x in (done.stderr + done.stdout).splitlines() if x.strip()]
            raise ImageError(f"mksquashfs: {lines[-1] if lines else done.returncode}")
        os.replace(partial, output)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        if pseudo_file:
            os.unlink(pseudo_file)


def import_image(
    text: str, output: str | None = None, arch: str | None = None, cache: Cache | None = None
) -> str:
    """Import the image `text` names; the path of the squashfs file: `output`, or the
    cache's file for it. Raises ImageError with one line saying what went wrong; on
    any failure nothing is left behind but the blobs already fetched."""
    source = parse(text)
    arch = arch or archives.host_architecture()
    cache = cache or Cache()
    cache.ensure()
    target = output or cache.image(source.name)
    if output is not None and os.path.exists(output):
        raise ImageError(f"{output} already exists: remove it or give another --output")
    work = tempfile.mkdtemp(prefix="import-", dir=cache.work)
    try:
        if source.kind == "docker":
            image = from_registry(source, arch, cache)
        elif source.kind in ENGINES:
            image = from_engine(source, arch, work)
        elif source.kind == "oci":
            image = archives.oci_layout(source, arch)
        else:
            image = archives.docker_archive(source, arch)
        root = os.path.join(work, "rootfs")
        os.mkdir(root, 0o755)
        modes = rootfs.Modes()
        try:
            for layer in image.layers:
                rootfs.apply(root, layer, modes)
        finally:
            image.close()
        rootfs.configure(root, image.config)
        modes.finish()
        squash(root, target, modes.pseudo(root))
    finally:
        rootfs.remove_tree(work)
    if output is None:
        cache.record(source.name, text, image.digest)
        cache.evict(keep=target)
    return target


def ensure(text: str, arch: str | None = None, cache: Cache | None = None) -> str:
    """The user's cached image for reference `text`, imported first when it is not
    cached (as Pyxis imports a `--container-image` reference at job start). Two jobs
    asking at once import it once."""
    source = parse(text)
    cache = cache or Cache()
    path = cache.image(source.name)
    with cache.locked(source.name):
        if os.path.isfile(path):
            cache.touch(path)
            return path
        return import_image(text, None, arch, cache)


def preload() -> None:
    """Import now what an import loads on the way (decompressors, TLS), so that a
    child that has dropped to a user who cannot read this Python's files still can."""
    import bz2  # noqa: F401
    import encodings.idna  # noqa: F401  (http.client's host names)
    import gzip  # noqa: F401
    import lzma  # noqa: F401
    import zlib  # noqa: F401

    import podium.run.containers.images.cache  # noqa: F401


def main(argv: list[str] | None = None) -> int:
    """`python -m podium.run.containers.images.importer REFERENCE`: ensure() it, print the path
    (what a job's supervisor runs as the job's user); errors are one line, exit 2."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: importer REFERENCE", file=sys.stderr)
        return 2
    try:
        print(ensure(args[0]))
    except ImageError as exc:
        print(exc, file=sys.stderr)
        return 2
    return 0


__all__ = ["SQUASH_DEFAULTS", "ensure", "import_image", "main", "squash"]

if __name__ == "__main__":
    sys.exit(main())
