"""What a ClusterQueue could ever give one workload (nominal quota plus borrowing within
its cohort), and the image a pod pulls: the pure parts of the Kubernetes backend's
refusals before anything is created."""

from __future__ import annotations

from typing import Any

import pytest

from podium.backends.kubernetes.admission import pod_image
from podium.backends.kubernetes.queue_fit import _capacity, pod_requests
from podium.errors import SpecError


def queue(name: str, gpus: int, cohort: str | None = None, **limits: int) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": gpus}
    if "borrow" in limits:
        resource["borrowingLimit"] = limits["borrow"]
    if "lend" in limits:
        resource["lendingLimit"] = limits["lend"]
    spec: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                            "flavors": [{"name": "h100", "resources": [resource]}]}]
    }  # fmt: skip
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


def test_alone_a_queue_gives_its_nominal_quota() -> None:
    a = queue("a", 16)
    assert _capacity(a, {"a": a}) == {"nvidia.com/gpu": 16}


def test_in_a_cohort_it_may_borrow_what_the_others_lend() -> None:
    a, b, c = queue("a", 16, "lab"), queue("b", 32, "lab", lend=8), queue("c", 64, "other")
    every = {"a": a, "b": b, "c": c}
    assert _capacity(a, every) == {"nvidia.com/gpu": 24}  # 16 + b's lending limit
    limited = queue("a", 16, "lab", borrow=4)
    assert _capacity(limited, {**every, "a": limited}) == {"nvidia.com/gpu": 20}


def test_a_jobset_asks_per_pod_times_pods() -> None:
    container = {"resources": {"requests": {"nvidia.com/gpu": "8", "cpu": "500m"}}}
    job = {"kind": "JobSet", "spec": {"replicatedJobs": [{"replicas": 1, "template": {"spec": {
        "parallelism": 4, "template": {"spec": {"containers": [container]}}}}}]}}  # fmt: skip
    assert pod_requests(job) == ({"nvidia.com/gpu": 8.0, "cpu": 0.5}, 4)


@pytest.mark.parametrize(
    ("given", "pod"),
    [
        ("nvcr.io#nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:24.05-py3"),
        ("docker://ubuntu:22.04", "ubuntu:22.04"),
        ("busybox", "busybox"),
        ("ghcr.io#org/img@sha256:" + "a" * 64, "ghcr.io/org/img@sha256:" + "a" * 64),
    ],
)
def test_images_are_written_as_a_pod_pulls_them(given: str, pod: str) -> None:
    assert pod_image(given) == pod


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ("/images/pytorch.sqsh", "pulls its image from a registry"),
        ("dockerd://pytorch", "pulls its image from a registry"),
        ("me@nvcr.io#nvidia/pytorch", "imagePullSecrets"),
        ("Bad Image!!", "expected an image reference"),
    ],
)
def test_images_a_pod_cannot_pull_are_refused(given: str, why: str) -> None:
    with pytest.raises(SpecError, match=why):
        pod_image(given)
