"""Where Podium keeps its state: $PODIUM_HOME, else the user's state directory.

Standard library only (used by the client).
"""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """The state directory: $PODIUM_HOME, $XDG_STATE_HOME/podium or ~/.local/state/podium."""
    explicit = os.environ.get("PODIUM_HOME")
    if explicit:
        return Path(explicit).absolute()
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "podium"


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
