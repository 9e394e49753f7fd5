"""Pyxis' container options as sbatch and srun read them: their names, the forms of
their values, and the request the runtime (podium.run.containers.lifecycle) takes.

Standard library only: srun's fast path and the supervisor read it.
"""

from __future__ import annotations

MOUNT_FLAGS = frozenset({"ro", "rw", "private", "rprivate", "slave", "rslave"})
# Options with a value: option -> the runtime request's key.
VALUED = {
    "container-image": "image",
    "container-mounts": "mounts",
    "container-workdir": "workdir",
    "container-name": "name",
    "container-save": "save",
    "container-env": "env_names",
}
# Flags: option -> (the request's key, its value). The second of each pair undoes the
# first; the last given wins, as sbatch and srun read options.
SWITCHES = {
    "container-writable": ("writable", True),
    "container-readonly": ("writable", False),
    "container-mount-home": ("mount_home", True),
    "no-container-mount-home": ("mount_home", False),
    "container-remap-root": ("remap_root", True),
    "no-container-remap-root": ("remap_root", False),
    "container-entrypoint": ("entrypoint", True),
    "no-container-entrypoint": ("entrypoint", False),
}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def is_image_path(image: str) -> bool:
    """Whether Pyxis reads `image` as a path (a squashfs file or a root directory),
    not as an image reference to pull: it starts with '/' or '.'."""
    return image.startswith(("/", "."))


def _plain(text: str) -> bool:
    return bool(text) and text.isprintable() and not any(c.isspace() for c in text)


def check_value(option: str, value: str) -> str | list[str]:
    """The value of Pyxis option `option` (a VALUED key), checked for form; raises
    ValueError with what is wrong and what would be right."""
    if option == "container-mounts":
        return mount_specs(value)
    if option == "container-env":
        names = [n for n in value.split(",") if n]
        if not names or not all(n.isidentifier() and n.isascii() for n in names):
            raise ValueError(f"expected NAME[,NAME...], got {value!r}")
        return names
    if not _plain(value):
        raise ValueError(f"expected one word, got {value!r}")
    if option == "container-workdir" and not value.startswith("/"):
        raise ValueError(f"expected an absolute path, got {value!r}")
    if option == "container-name" and (len(value) > 64 or not set(value) <= _NAME_CHARS):
        raise ValueError(f"expected a name of letters, digits, '_', '.' and '-', got {value!r}")
    if option == "container-save" and not value.endswith(".sqsh"):
        raise ValueError(f"expected the path of a .sqsh file, got {value!r}")
    return value


def mount_specs(value: str) -> list[str]:
    """--container-mounts=SRC[:DST[:FLAGS]],...: SRC and DST absolute, FLAGS joined by
    '+' (ro, rw and propagation); each normalised to SRC:DST[:FLAGS]. Raises
    ValueError."""
    items = [m for m in value.split(",") if m]
    if not items:
        raise ValueError("expected SRC[:DST[:FLAGS]],..., got nothing")
    normal = []
    for item in items:
        parts = item.split(":")
        if len(parts) > 3 or not _plain(item):
            raise ValueError(f"expected SRC[:DST[:FLAGS]],..., got {item!r}")
        src, dst = parts[0], parts[1] if len(parts) > 1 and parts[1] else parts[0]
        flags = [f for f in (parts[2] if len(parts) > 2 else "").split("+") if f]
        if not src.startswith("/") or not dst.startswith("/"):
            raise ValueError(f"{item!r}: SRC and DST must be absolute paths")
        if ".." in src.split("/") or ".." in dst.split("/"):
            raise ValueError(f"{item!r}: '..' is not allowed in a mount path")
        if bad := [f for f in flags if f not in MOUNT_FLAGS]:
            known = ", ".join(sorted(MOUNT_FLAGS))
            raise ValueError(f"{item!r}: unknown flag {bad[0]!r} (expected {known})")
        normal.append(f"{src}:{dst}:{'+'.join(flags)}" if flags else f"{src}:{dst}")
    return normal


def parse_mounts(specs: list[str] | tuple[str, ...]) -> list[tuple[str, str, list[str]]]:
    """Normalised SRC:DST[:FLAGS] strings as (src, dst, flags)."""
    out = []
    for spec in specs:
        src, dst, *rest = spec.split(":")
        out.append((src, dst, [f for f in (rest[0] if rest else "").split("+") if f]))
    return out


__all__ = [
    "MOUNT_FLAGS", "SWITCHES", "VALUED", "check_value", "is_image_path", "mount_specs",
    "parse_mounts",
]  # fmt: skip
