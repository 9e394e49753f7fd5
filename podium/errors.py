"""The one exception hierarchy of Podium.

    PodiumError                 anything Podium refuses or cannot do
    ├── SpecError               a job request is malformed (bad directive, value, key)
    │   └── Unsatisfiable       a well-formed job that can never run on this cluster
    ├── ConfigError             the cluster config is malformed
    ├── PermissionDenied        the caller may not act on that job or node
    ├── NotFound                no such job or node
    ├── StoreError              the state database cannot be used (corrupt, disk full)
    │   └── StateDiskFull       its disk is full (nothing was written)
    ├── ApiError                a backend refused a request (with its HTTP status)
    └── DaemonUnavailable       the client cannot reach the daemon

Every message is one line that says what is wrong and, where it can, what would be
right. `exit_code` is what the CLI exits with: 2 for bad input, 1 otherwise.
"""

from __future__ import annotations


class PodiumError(Exception):
    """Base of every error Podium raises on purpose."""

    exit_code = 1
    http_status = 500


class SpecError(PodiumError):
    """A job request is malformed."""

    exit_code = 2
    http_status = 400


class Unsatisfiable(SpecError):
    """A well-formed job that this cluster can never run (e.g. more GPUs than exist)."""


class ConfigError(PodiumError):
    """The cluster config is malformed."""

    exit_code = 2
    http_status = 400


class PermissionDenied(PodiumError):
    """The caller may not act on this job or node."""

    exit_code = 1
    http_status = 403


class Unauthenticated(PodiumError):
    """A request over HTTP without a valid token (none, malformed, unknown, expired or
    revoked)."""

    exit_code = 1
    http_status = 401


class NotFound(PodiumError):
    """No such job or node."""

    exit_code = 2
    http_status = 404


class StoreError(PodiumError):
    """The state database cannot be used: corrupt, emptied, or its disk is full."""

    exit_code = 1
    http_status = 503


class StateDiskFull(StoreError):
    """The state database could not be written: its disk is full."""


class ApiError(PodiumError):
    """A backend (the daemon, or Slurm through its API) refused a request; `status`
    is the HTTP status it would answer with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status
        self.exit_code = 2 if status in (400, 404, 422) else 1


class DaemonUnavailable(PodiumError):
    """The client cannot reach a running daemon."""

    exit_code = 1
    http_status = 503
