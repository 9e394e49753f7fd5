"""A user's image cache: imported images (NAME.sqsh, with NAME.json saying where each
came from) and the registry blobs they were made of (blobs/sha256/HEX, so that a
re-import downloads only what changed), under `$PODIUM_IMAGE_CACHE`, else
`$XDG_CACHE_HOME/podium/images`, else `~/.cache/podium/images`.

Its size is bounded (`$PODIUM_IMAGE_CACHE_MAX`, e.g. 20G, the default): after an
import, the least recently used blobs go first, then the least recently used images,
never the one just used. Files are written under temporary names and renamed, so a
reader never sees half of one, and two imports of one image wait for each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from podium.run.containers.images.reference import ImageError

DEFAULT_MAX = 20 << 30
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGT]?)i?B?$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,200}$")


def parse_size(text: str) -> int:
    """ "20G", "512M", "1T" or a number of bytes; raises ImageError."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ImageError(f"PODIUM_IMAGE_CACHE_MAX={text!r}: expected a size like 20G or 512M")
    unit = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match[2].upper()]
    return int(float(match[1]) * unit)


@dataclass(frozen=True)
class Entry:
    """One cached image: its name, file, size, where it came from, when it was made
    and last used."""

    name: str
    path: str
    size: int
    source: str
    created: float
    used: float


class Cache:
    """The image cache at `root` (made on first use, private to its user)."""

    def __init__(self, root: str | None = None, limit: int | None = None) -> None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        self.root = (
            root or os.environ.get("PODIUM_IMAGE_CACHE") or os.path.join(base, "podium", "images")
        )
        setting = os.environ.get("PODIUM_IMAGE_CACHE_MAX")
        self.limit = limit if limit is not None else parse_size(setting) if setting else DEFAULT_MAX

    def ensure(self) -> None:
        for path in (self.root, self.blobs, self.work):
            os.makedirs(path, mode=0o700, exist_ok=True)

    @property
    def blobs(self) -> str:
        return os.path.join(self.root, "blobs", "sha256")

    @property
    def work(self) -> str:
        return os.path.join(self.root, "tmp")

    def blob(self, digest: str) -> str:
        """Where blob `digest` (sha256:HEX) is kept."""
        return os.path.join(self.blobs, digest.removeprefix("sha256:"))

    def image(self, name: str) -> str:
        """Where image `name` is kept; raises ImageError for a name that is no file name."""
        if not _NAME.match(name):
            raise ImageError(f"{name!r} is not an image name (letters, digits, _ . + -)")
        return os.path.join(self.root, f"{name}.sqsh")

    @contextlib.contextmanager
    def locked(self, name: str) -> Iterator[None]:
        """Hold the lock of image `name` (one import of it at a time)."""
        self.ensure()
        fd = os.open(os.path.join(self.work, f"{name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def record(self, name: str, source: str, digest: str) -> None:
        """Note where image `name` came from (beside its file)."""
        meta = {"source": source, "digest": digest, "created": time.time()}
        tmp = os.path.join(self.root, f".{name}.json.{os.getpid()}")
        with open(tmp, "w") as fh:
            json.dump(meta, fh)
        os.replace(tmp, os.path.join(self.root, f"{name}.json"))

    def touch(self, path: str) -> None:
        """Mark a cached file used now (what eviction goes by)."""
        with contextlib.suppress(OSError):
            os.utime(path)

    def entries(self) -> list[Entry]:
        """The cached images, most recently used first."""
        out = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for file in names:
            if not file.endswith(".sqsh") or file.startswith("."):
                continue
            name = file.removesuffix(".sqsh")
            path = os.path.join(self.root, file)
            meta: dict[str, Any] = {}
            meta_path = os.path.join(self.root, f"{name}.json")
            with contextlib.suppress(OSError, ValueError), open(meta_path) as fh:
                meta = json.load(fh)
            try:
                info = os.stat(path)
            except FileNotFoundError:
                continue
            out.append(
                Entry(
                    name,
                    path,
                    info.st_size,
                    str(meta.get("source", "")),
                    float(meta.get("created", info.st_mtime)),
                    info.st_mtime,
                )
            )
        return sorted(out, key=lambda e: -e.used)

    def remove(self, name: str) -> bool:
        """Remove image `name`; False when there is none."""
        path = self.image(name)
        if not os.path.exists(path):
            return False
        os.unlink(path)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.root, f"{name}.json"))
        return True

    def size(self) -> int:
        """Bytes the cache's images and blobs take."""
        return sum(s for _, s, _ in self._files())

    def _files(self) -> list[tuple[str, int, float]]:
        found = []
        for directory in (self.root, self.blobs):
            try:
                entries = list(os.scandir(directory))
            except FileNotFoundError:
                continue
            for e in entries:
                if e.is_file(follow_symlinks=False) and (
                    directory == self.blobs or e.name.endswith(".sqsh")
                ):
                    info = e.stat(follow_symlinks=False)
                    found.append((e.path, info.st_size, info.st_mtime))
        return found

    def evict(self, keep: str | None = None) -> list[str]:
        """Remove the least recently used blobs, then images, until the cache is within
        its limit; never `keep`. The paths removed."""
        files = self._files()
        total = sum(s for _, s, _ in files)
        removed = []
        blobs_first = sorted(files, key=lambda f: (not f[0].startswith(self.blobs), f[2]))
        for path, size, _ in blobs_first:
            if total <= self.limit:
                break
            if path == keep:
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                if path.endswith(".sqsh"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path.removesuffix(".sqsh") + ".json")
                removed.append(path)
                total -= size
        return removed


__all__ = ["DEFAULT_MAX", "Cache", "Entry", "parse_size"]
