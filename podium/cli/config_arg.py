"""The cluster config an admin command reads: `--config FILE`, else $PODIUM_CONFIG,
else $PODIUM_HOME/cluster.yaml (as every other command finds it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from podium.errors import ConfigError

if TYPE_CHECKING:
    from podium.config.cluster import ClusterConfig


def cluster_config(given: Path | None) -> ClusterConfig:
    """The config at `given`, else the one the CLI uses. Raises ConfigError (one
    line) when there is none there, or it does not load."""
    from podium.backends import config_file
    from podium.config.cluster import load_config

    path = given or Path(config_file())
    if not path.exists():
        raise ConfigError(f"no cluster config at {path}: give one with --config FILE")
    return load_config(path)


__all__ = ["cluster_config"]
