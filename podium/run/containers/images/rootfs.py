"""An image's layers applied in order into a root tree, and its config turned into the
files enroot's image format reads (/etc/environment, /etc/rc, /etc/fstab).

Layers are tar streams (gzip, or zstd through the `zstd` program, or plain) applied
as Docker applies them: `.wh.NAME` removes NAME of the layers below; `.wh..wh..opq`
hides everything below in its directory that this layer did not itself make. Every
path is resolved inside the root (symbolic links included, absolute ones taken as
relative to the root, `..` stopping at it), so a hostile layer writes nothing outside
it; device nodes are left out (as enroot leaves out dev/*). The importing user owns
what is written; `Modes` remembers what a file's mode was when the user could not
read it as it is, for mksquashfs to restore in the image.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
import tarfile
import threading
from dataclasses import dataclass, field
from typing import IO, Any

from podium.run.containers.images.archives import Layer
from podium.run.containers.images.reference import ImageError

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MAX_LINKS = 40
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class Modes:
    """What the tree needs after extraction: directories' final modes and times (set
    last, deepest first, so that writing into them stays possible), and the modes an
    owner could not read or search with (kept readable here; the image gets the real
    mode through mksquashfs's pseudo definitions)."""

    dirs: dict[str, tuple[int, float]] = field(default_factory=dict)
    restore: dict[str, int] = field(default_factory=dict)

    def finish(self) -> None:
        """Give every directory the tree still has its mode (readable) and time."""
        for path, (mode, mtime) in sorted(self.dirs.items(), key=lambda p: -p[0].count("/")):
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    continue  # replaced by a later layer
            except FileNotFoundError:
                continue
            if mode & 0o7777 != _readable(mode, True):
                self.restore[path] = mode & 0o7777
            os.chmod(path, _readable(mode, True))
            os.utime(path, (mtime, mtime), follow_symlinks=False)

    def pseudo(self, root: str) -> str:
        """mksquashfs pseudo definitions ("PATH m MODE 0 0") for modes kept readable."""
        lines = []
        for path, mode in sorted(self.restore.items()):
            if not os.path.lexists(path):
                continue
            rel = os.path.relpath(path, root)
            if any(c in rel for c in '\n"\\ ') or not rel.isprintable():
                continue  # mksquashfs could not name it: it keeps the readable mode
            lines.append(f"{rel} m {mode & 0o7777:o} 0 0")
        return "\n".join(lines) + ("\n" if lines else "")


def _readable(mode: int, directory: bool) -> int:
    return (mode & 0o7777) | (0o700 if directory else 0o600)


def _parts(name: str) -> list[str]:
    return [p for p in name.split("/") if p not in ("", ".")]


def resolve(root: str, parts: list[str], make_dirs: bool = False) -> str:
    """The real path of `parts` (below `root`), every symbolic link on the way
    resolved inside `root` (an absolute target from `root`, `..` never above it).
    With `make_dirs`, missing directories are made and a non-directory in the way is
    replaced. Raises ImageError on a link loop."""
    done: list[str] = []
    pending = list(parts)
    links = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        path = os.path.join(root, *done, part)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            if make_dirs:
                os.mkdir(path, 0o755)
            done.append(part)
            continue
        if stat.S_ISLNK(info.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise ImageError(f"too many levels of symbolic links at /{'/'.join(done)}")
            target = os.readlink(path)
            if target.startswith("/"):
                done = []
            pending = _parts(target) + pending
            continue
        if make_dirs and not stat.S_ISDIR(info.st_mode):
            remove_tree(path)
            os.mkdir(path, 0o755)
        done.append(part)
    return os.path.join(root, *done)


def remove_tree(path: str) -> None:
    """Remove a file, link or whole directory, opening directories the owner may not
    write to on the way."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(path)
        return
    for top, dirs, _ in os.walk(path):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(top, name), 0o700, follow_symlinks=False)
    os.chmod(path, 0o700)
    shutil.rmtree(path)


def _stream(layer: Layer) -> IO[bytes]:
    """The layer's tar, uncompressed by zstd when it is zstd-compressed (tarfile reads
    gzip itself)."""
    raw = layer.open()
    peek = getattr(raw, "peek", None)
    if peek is None or peek(4)[:4] != ZSTD_MAGIC:
        return raw
    if shutil.which("zstd") is None:
        raw.close()
        raise ImageError("a layer is zstd-compressed: install zstd (apt install zstd) to import it")
    proc = subprocess.Popen(
        ["zstd", "-dc"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    feeder, out = proc.stdin, proc.stdout
    assert feeder is not None and out is not None

    def feed() -> None:
        try:
            shutil.copyfileobj(raw, feeder)
        except OSError:
            pass
        finally:
            raw.close()
            feeder.close()

    threading.Thread(target=feed, daemon=True).start()
    return out


def apply(root: str, layer: Layer, modes: Modes) -> None:
    """Apply one layer on top of what `root` holds (see the module docstring)."""
    made: set[str] = set()  # paths this layer made: an opaque marker keeps them
    stream = _stream(layer)
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                _member(root, tar, member, made, modes)
    except tarfile.TarError as exc:
        raise ImageError(f"layer {layer.digest[:19] or ''}: not a tar archive: {exc}") from None
    finally:
        stream.close()


def _member(
    root: str, tar: tarfile.TarFile, member: tarfile.TarInfo, made: set[str], modes: Modes
) -> None:
    parts = _parts(member.name)
    if not parts or ".." in parts or (parts[0] == "dev" and len(parts) > 1):
        return  # the root itself, an escape, or a device directory's content
    name = parts[-1]
    parent = resolve(root, parts[:-1], make_dirs=True)
    if name == OPAQUE:
        _hide_below(parent, made)
        return
    if name.startswith(WHITEOUT):
        hidden = os.path.join(parent, name[len(WHITEOUT) :])
        if hidden not in made:
            remove_tree(hidden)
        return
    path = os.path.join(parent, name)
    existing = os.path.lexists(path)
    if member.isdir():
        if existing and not (os.path.isdir(path) and not os.path.islink(path)):
            remove_tree(path)
            existing = False
        if not existing:
            os.mkdir(path, 0o700)
        modes.dirs[path] = (member.mode, float(member.mtime))
        made.add(path)
        return
    if member.ischr() or member.isblk():
        return  # devices are the host's business (enroot leaves them out too)
    if existing:
        remove_tree(path)
    if member.issym():
        os.symlink(member.linkname, path)
    elif member.islnk():
        link = _parts(member.linkname)
        if not link or ".." in link:
            return
        target = os.path.join(resolve(root, link[:-1]), link[-1])
        if not os.path.isfile(target) or os.path.islink(target):
            return  # a hard link to nothing this image has: left out
        os.link(target, path, follow_symlinks=False)
    elif member.isfifo():
        os.mkfifo(path, 0o600)
        _set_mode(path, member, modes)
    elif member.isfile():
        data = tar.extractfile(member)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            if data is not None:
                shutil.copyfileobj(data, out, 1 << 20)
        _set_mode(path, member, modes)
    else:
        return
    made.add(path)
    with contextlib.suppress(OSError):
        os.utime(path, (member.mtime, member.mtime), follow_symlinks=False)


def _set_mode(path: str, member: tarfile.TarInfo, modes: Modes) -> None:
    mode = member.mode & 0o7777
    if mode != _readable(mode, False):
        modes.restore[path] = mode
    os.chmod(path, _readable(mode, False))


def _hide_below(directory: str, made: set[str]) -> None:
    """An opaque directory: remove everything below it that this layer did not make."""
    for top, dirs, files in os.walk(directory, topdown=True):
        for name in [*files, *dirs]:
            path = os.path.join(top, name)
            if path not in made:
                remove_tree(path)
        dirs[:] = [d for d in dirs if os.path.join(top, d) in made]


def configure(root: str, config: dict[str, Any]) -> None:
    """Write what enroot writes from an image's config: its Env to /etc/environment,
    its Volumes as tmpfs mounts to /etc/fstab, and /etc/rc running its Entrypoint and
    Cmd in its WorkingDir (the command given, if any, replacing Cmd)."""
    inner = config.get("config") or {}
    etc = resolve(root, ["etc"], make_dirs=True)
    env = [e for e in inner.get("Env") or [] if isinstance(e, str) and "=" in e and "\n" not in e]
    _write(os.path.join(etc, "environment"), "".join(f"{e}\n" for e in env))
    volumes = [v for v in inner.get("Volumes") or {} if isinstance(v, str) and v.startswith("/")]
    fstab = "".join(
        f"tmpfs {v} tmpfs x-create=dir,rw,nosuid,nodev\n"
        for v in volumes
        if v.isprintable() and " " not in v
    )
    _write(os.path.join(etc, "fstab"), fstab)
    entry = [str(a) for a in inner.get("Entrypoint") or []]
    cmd = [str(a) for a in inner.get("Cmd") or []]
    if not entry and not cmd:
        cmd = ["/bin/sh"]
    workdir = str(inner.get("WorkingDir") or "/")
    prefix = " ".join(shlex.quote(a) for a in entry)
    script = (
        f"cd {shlex.quote(workdir)} || exit 1\n\n"
        "if [ $# -gt 0 ]; then\n"
        f'    exec {prefix + " " if prefix else ""}"$@"\n'
        "else\n"
        f"    exec {' '.join(shlex.quote(a) for a in [*entry, *cmd])}\n"
        "fi\n"
    )
    _write(os.path.join(etc, "rc"), script, 0o755)


def _write(path: str, text: str, mode: int = 0o644) -> None:
    if os.path.lexists(path):
        remove_tree(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    os.chmod(path, mode)


__all__ = ["Modes", "apply", "configure", "remove_tree", "resolve"]
