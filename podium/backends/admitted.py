"""What every backend does with a submission before its engine sees it: sbatch's
reading of it against the config and the backend's Admission (its defaults and
refusals); and the --test-only answer (podium.jobspec.test_only, which the embedded
daemon's intake shares). One helper each, so a new backend writes neither again."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from podium import __version__
from podium.api.caller import Caller
from podium.config.cluster import ClusterConfig
from podium.jobspec.build import Admission, SubmitRequest, build_job
from podium.jobspec.job import JobSpec
from podium.jobspec.test_only import test_only_answer


def admitted_spec(
    request: Mapping[str, Any], config: ClusterConfig, who: Caller, admission: Admission
) -> tuple[JobSpec, list[str]]:
    """The job `request` (a submit body) asks for, read as sbatch reads it and admitted
    by `admission`, and what the user should be told of an accepted job (an option
    recorded but not applied). Raises SpecError or Unsatisfiable with the reason."""
    built = build_job(SubmitRequest(**dict(request)), config, who, time.time(), admission)
    return built.spec, list(built.warnings)


def engine_ping(backend: str, cluster: str, who: Caller, **more: Any) -> dict[str, Any]:
    """`podium ping`'s answer from a backend that runs no daemon of Podium's: who the
    caller is to the cluster, and `more` of what the engine says of itself."""
    return {
        "version": __version__,
        "pid": None,
        "node": cluster,
        "you": who.name,
        "admin": who.is_admin,
        "backend": backend,
        **more,
    }


# test_only_answer is podium.jobspec.test_only's, here beside what a backend needs
__all__ = [
    "admitted_spec",
    "engine_ping",
    "test_only_answer",
]
