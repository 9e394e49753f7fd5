"""ParallelCluster's AWS-only settings: accepted in a cluster definition, named in one
warning line each, and kept out of Slurm's files.

A ParallelCluster 3 `cluster.yaml` (the seeds' own included) carries settings that
only AWS can act on: subnets and security groups, SSH key pairs, IAM policies, EBS
volumes, capacity reservations, placement groups, FSx volume ids, post-install
scripts. `strip_aws_only` takes them out, section by section, before the definition is
validated strictly, so a typo in a key Podium does act on is still an error with its
path. Keys are those of ParallelCluster 3's configuration reference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

TOP = frozenset({
    "Tags", "Monitoring", "AdditionalPackages", "Iam", "DeploymentSettings", "LoginNodes",
    "DevSettings", "Imds", "CustomS3Bucket", "AdditionalResources", "DirectoryService",
})  # fmt: skip
HEAD_NODE = frozenset({
    "Networking", "Ssh", "LocalStorage", "Iam", "CustomActions", "Imds", "Dcv", "Image",
    "DisableSimultaneousMultithreading", "SharedStorageType",
})  # fmt: skip
SCHEDULING = frozenset({"ScalingStrategy"})
SLURM_SETTINGS = frozenset({
    "QueueUpdateStrategy", "EnableMemoryBasedScheduling", "Dns", "Database",
    "ExternalSlurmdbd", "CustomSlurmSettings", "CustomSlurmSettingsIncludeFile",
    "MungeKeySecretArn",
})  # fmt: skip
QUEUE = frozenset({
    "CapacityType", "Networking", "ComputeSettings", "AllocationStrategy", "CustomActions",
    "Iam", "Image", "HealthChecks", "JobExclusiveAllocation", "CustomSlurmSettings",
    "CapacityReservationTarget", "Tags",
})  # fmt: skip
COMPUTE_RESOURCE = frozenset({
    "CapacityReservationTarget", "DisableSimultaneousMultithreading", "SchedulableMemory",
    "HealthChecks", "Networking", "SpotPrice", "StaticNodePriority", "DynamicNodePriority",
    "CustomSlurmSettings", "Tags", "LaunchTemplateOverrides",
})  # fmt: skip
EFA = frozenset({"GdrSupport"})
SHARED_STORAGE = frozenset({
    "FsxLustreSettings", "FsxOpenZfsSettings", "FsxOntapSettings", "EfsSettings",
    "EbsSettings", "FileCacheSettings",
})  # fmt: skip


def strip_aws_only(data: dict[str, Any]) -> list[str]:
    """Remove the AWS-only keys from `data` (a parsed cluster.yaml), in place; the path
    of each one removed, in the file's order."""
    return list(_strip(data))


def _strip(data: dict[str, Any]) -> Iterator[str]:
    yield from _take(data, TOP, "")
    if isinstance(head := data.get("HeadNode"), dict):
        yield from _take(head, HEAD_NODE, "HeadNode.")
    scheduling = data.get("Scheduling")
    if isinstance(scheduling, dict):
        yield from _take(scheduling, SCHEDULING, "Scheduling.")
        if isinstance(settings := scheduling.get("SlurmSettings"), dict):
            yield from _take(settings, SLURM_SETTINGS, "Scheduling.SlurmSettings.")
        for q, queue in _items(scheduling.get("SlurmQueues")):
            where = f"Scheduling.SlurmQueues.{q}."
            yield from _take(queue, QUEUE, where)
            for c, resource in _items(queue.get("ComputeResources")):
                at = f"{where}ComputeResources.{c}."
                yield from _take(resource, COMPUTE_RESOURCE, at)
                if isinstance(efa := resource.get("Efa"), dict):
                    yield from _take(efa, EFA, f"{at}Efa.")
    for s, storage in _items(data.get("SharedStorage")):
        yield from _take(storage, SHARED_STORAGE, f"SharedStorage.{s}.")


def _items(value: object) -> Iterator[tuple[int, dict[str, Any]]]:
    if isinstance(value, list):
        yield from ((i, v) for i, v in enumerate(value) if isinstance(v, dict))


def _take(section: dict[str, Any], keys: frozenset[str], where: str) -> Iterator[str]:
    for key in [k for k in section if k in keys]:
        del section[key]
        yield f"{where}{key}"


def unexpanded(data: object, where: str = "") -> Iterator[str]:
    """The paths of string values that still hold a `${VAR}` of a template (the seeds
    write cluster.yaml through envsubst)."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from unexpanded(value, f"{where}{key}.")
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from unexpanded(value, f"{where}{i}.")
    elif isinstance(data, str) and "${" in data:
        yield f"{where.rstrip('.')}: {data!r}"
