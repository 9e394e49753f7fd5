"""The backend registry: the config's `backend:` names the Backend the CLI uses.

    backend: embedded   # the default: the local daemon (podium up)
    backend: slurm      # a real Slurm cluster through its tools or slurmrestd
    backend: kubernetes # Kueue on a Kubernetes cluster (Jobs and JobSets)

Each entry is imported only when chosen, so the embedded fast path never loads Slurm's
code (nor pydantic). The config file is read with YAML's C loader when it names a
backend at all.
"""

from __future__ import annotations

import importlib
import os

from podium import paths
from podium.errors import ConfigError

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from podium.api.backend_protocol import Backend

# name -> (module, class): the implementations of podium.api.backend_protocol.Backend
BACKENDS = {
    "embedded": ("podium.backends.embedded.client", "EmbeddedBackend"),
    "slurm": ("podium.backends.slurm.backend", "SlurmBackend"),
    "kubernetes": ("podium.backends.kubernetes.backend", "KubernetesBackend"),
}


def config_file(home: Path | str | None = None) -> str:
    """The cluster config the CLI reads: $PODIUM_CONFIG, else HOME/cluster.yaml."""
    return os.environ.get("PODIUM_CONFIG") or paths.config_file(home)


def backend_name(path: str | os.PathLike[str]) -> str:
    """The `backend:` of the config at `path` ("embedded" when there is no file or
    the file names none, or it is the embedded daemon's own config, private to its
    owner). Raises ConfigError for an unknown name, a file that is not YAML, or a file
    named by $PODIUM_CONFIG that cannot be read (a silent fall back to the embedded
    cluster would send the command to another cluster)."""
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        return "embedded"
    except OSError as exc:
        if os.environ.get("PODIUM_CONFIG") == os.fspath(path):
            # named, but not readable: never fall back to another cluster
            raise ConfigError(f"cannot read the cluster config {path}: {exc.strerror}") from None
        return "embedded"  # the daemon's own config in its home, private to its owner
    if "backend" not in text:  # no YAML parse on the fast path
        return "embedded"
    import yaml

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    name = data.get("backend", "embedded") if isinstance(data, dict) else "embedded"
    if name not in BACKENDS:
        raise ConfigError(
            f"{path}: backend: {name!r} is not a backend; expected one of "
            f"{', '.join(sorted(BACKENDS))}"
        )
    return str(name)


def open_backend(home: Path | None = None, timeout: float = 60.0) -> Backend:
    """The Backend for this cluster, as its config names it; a Podium daemon's HTTP
    listener when $PODIUM_URL names one (and no `home` is given)."""
    path = config_file(home)
    name = "embedded" if home is None and os.environ.get("PODIUM_URL") else backend_name(path)
    module, cls = BACKENDS[name]
    backend_class = getattr(importlib.import_module(module), cls)
    if name == "embedded":
        backend: Backend = backend_class(home, timeout)
    else:
        from pathlib import Path

        from podium.config.cluster import load_config

        backend = backend_class(load_config(Path(path)), home)
    return backend
