"""Where Podium keeps its state: $PODIUM_HOME, else the user's state directory.

Standard library only (used by the client, whose lean path takes the text forms).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from pathlib import Path


def home_dir() -> str:
    """The state directory as text (the lean client's; no pathlib): $PODIUM_HOME made
    absolute, else $XDG_STATE_HOME/podium or ~/.local/state/podium."""
    explicit = os.environ.get("PODIUM_HOME")
    if explicit:
        return explicit if os.path.isabs(explicit) else os.path.join(os.getcwd(), explicit)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "podium")


def home() -> Path:
    """The state directory: $PODIUM_HOME, $XDG_STATE_HOME/podium or ~/.local/state/podium."""
    from pathlib import Path

    return Path(home_dir())


def socket_file(base: str | os.PathLike[str] | None = None) -> str:
    """The daemon's socket as text (see `socket_path`)."""
    return os.path.join(base or home_dir(), "podium.sock")


def config_file(base: str | os.PathLike[str] | None = None) -> str:
    """The cluster config as text (see `config_path`)."""
    return os.path.join(base or home_dir(), "cluster.yaml")


def socket_path(base: Path | None = None) -> Path:
    return (base or home()) / "podium.sock"


def config_path(base: Path | None = None) -> Path:
    return (base or home()) / "cluster.yaml"


def db_path(base: Path) -> Path:
    return base / "podium.db"


def pid_path(base: Path) -> Path:
    return base / "podiumd.pid"


def log_path(base: Path) -> Path:
    return base / "podiumd.log"
