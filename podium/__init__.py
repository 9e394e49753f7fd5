"""Podium: a Slurm-style workload manager for GPU training jobs.

The public surface is small on purpose: the exception hierarchy and the version.
Everything else is reached through the `podium` command or the REST API.
"""

from podium.errors import (
    ConfigError,
    NotFound,
    PermissionDenied,
    PodiumError,
    SpecError,
    Unsatisfiable,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "NotFound",
    "PermissionDenied",
    "PodiumError",
    "SpecError",
    "Unsatisfiable",
    "__version__",
]
