"""A ParallelCluster-style cluster definition (YAML), validated.

The shape follows AWS ParallelCluster 3's cluster config (PascalCase keys: HeadNode,
Scheduling.SlurmQueues[].ComputeResources[], SharedStorage) with what a cluster
without a cloud needs instead of an instance type: `Gpus: {Count, Type}`, `Cpus` and
`MemoryMiB`. Unknown keys are errors, with the key's path, so a typo is never ignored.
"""

from __future__ import annotations

import re
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from podium.api.mig import MODELS, MigLayoutError, model_for, place, profiles
from podium.backends.slurm.aws_keys import strip_aws_only, unexpanded
from podium.backends.slurm.network_layers import NetworkPlacement, check_layers, levels_of
from podium.config.yaml_text import load_config_text
from podium.errors import ConfigError

# Instance types ParallelCluster users name most, and what Slurm needs of them:
# (vCPUs, memory MiB, GPU count, GPU type).
INSTANCE_TYPES: dict[str, tuple[int, int, int, str | None]] = {
    "p5.48xlarge": (192, 2_097_152, 8, "h100"),
    "p5.4xlarge": (16, 262_144, 1, "h100"),
    "p5e.48xlarge": (192, 2_097_152, 8, "h200"),
    "p5en.48xlarge": (192, 2_097_152, 8, "h200"),
    "p4de.24xlarge": (96, 1_179_648, 8, "a100"),
    "p4d.24xlarge": (96, 1_179_648, 8, "a100"),
    "p3dn.24xlarge": (96, 786_432, 8, "v100"),
    "p3.16xlarge": (64, 499_712, 8, "v100"),
    "g6e.48xlarge": (192, 1_572_864, 8, "l40s"),
    "g6e.xlarge": (4, 32_768, 1, "l40s"),
    "g6.48xlarge": (192, 786_432, 8, "l4"),
    "g6.12xlarge": (48, 196_608, 4, "l4"),
    "g6.xlarge": (4, 16_384, 1, "l4"),
    "g5.48xlarge": (192, 786_432, 8, "a10g"),
    "g5.12xlarge": (48, 196_608, 4, "a10g"),
    "g5.2xlarge": (8, 32_768, 1, "a10g"),
    "g5.xlarge": (4, 16_384, 1, "a10g"),
    # Trainium chips are Neuron devices, not GPUs: Slurm gets no gpu GRES for them.
    "trn1.32xlarge": (128, 524_288, 0, None),
    "trn1n.32xlarge": (128, 524_288, 0, None),
    "trn1.2xlarge": (8, 32_768, 0, None),
    "c5.xlarge": (4, 8_192, 0, None),
    "c5.2xlarge": (8, 16_384, 0, None),
    "m5.xlarge": (4, 16_384, 0, None),
    "m5.2xlarge": (8, 32_768, 0, None),
}
# Slurm holds back this much of a node's memory for the OS (as ParallelCluster does).
MEMORY_RESERVE = 0.05


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class HeadNodeSpec(Strict):
    """The node running slurmctld (and Podium's CLI)."""

    Hostname: str = Field(default="head", pattern=r"^[A-Za-z0-9-]+$")
    InstanceType: str | None = None


class GpuSpec(Strict):
    Count: int = Field(ge=1, le=64)
    Type: str = Field(default="gpu", pattern=r"^[a-z0-9_]+$")


class MigSharing(Strict):
    """MIG: each GPU split into `PerGpu` slices of `Profile` (e.g. 1g.10gb x 7)."""

    Profile: str = Field(pattern=r"^\d+g\.\d+gb$")
    PerGpu: int = Field(ge=1, le=7)


def _mig_model(kind: str, layout: list[str]) -> str | None:
    """The MIG model of a GPU type whose memory the definition does not give: the first
    of the type's models (80GB before 40GB, 94GB after 80GB) with every profile of
    `layout`, else the type's default model."""
    family = [m for m in MODELS if m.startswith(kind.lower())]
    for model in sorted(family, key=lambda m: ("80gb" not in m, m)):
        if all(p in profiles(model) for p in layout):
            return model
    return model_for(kind, None)


class SharingSpec(Strict):
    """How a GPU is shared: whole (none), MIG slices, or MPS (percent shares). MIG is
    one profile `PerGpu` times (`Mig`), or a mixed `Layout` per GPU as Podium's
    node.gpus.mig gives it (checked against the H100/A100 placement rules)."""

    Mode: Literal["none", "mig", "mps", "shard"] = "none"
    Mig: MigSharing | None = None
    Layout: list[str] = Field(default_factory=list, description="mig mode: each GPU's slices")
    SharesPerGpu: int = Field(default=4, ge=1, le=128, description="shard mode only")

    @model_validator(mode="after")
    def _mig_needs_profile(self) -> SharingSpec:
        if self.Mode == "mig" and self.Mig is None and not self.Layout:
            raise ValueError(
                "Mode: mig needs Mig: {Profile: 1g.10gb, PerGpu: 7} or Layout: [3g.40gb, ...]"
            )
        if self.Mig is not None and self.Layout:
            raise ValueError("give Mig or Layout, not both")
        return self

    def slices(self) -> list[str]:
        """One GPU's MIG slices (mig mode), else []."""
        if self.Mode != "mig":
            return []
        if self.Layout:
            return list(self.Layout)
        return [self.Mig.Profile] * self.Mig.PerGpu if self.Mig is not None else []


class EfaSpec(Strict):
    Enabled: bool = False


class ComputeResource(Strict):
    """A group of identical nodes: an instance type, or CPUs/memory/GPUs given here."""

    Name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    InstanceType: str | None = None
    Cpus: int | None = Field(default=None, ge=1)
    MemoryMiB: int | None = Field(default=None, ge=1)
    Gpus: GpuSpec | None = None
    MinCount: int = Field(default=0, ge=0)
    MaxCount: int = Field(default=10, ge=1)
    Efa: EfaSpec = Field(default_factory=EfaSpec)
    Sharing: SharingSpec = Field(default_factory=SharingSpec)
    Features: list[str] = Field(default_factory=list)
    Network: list[NetworkPlacement] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _one_instance_type(cls, data: object) -> object:
        """ParallelCluster's `Instances: [{InstanceType: ...}]` (flexible instance
        types) of one type is that InstanceType; several types are refused: Slurm's
        nodes of one compute resource need one shape here."""
        if not isinstance(data, dict) or "Instances" not in data:
            return data
        data = dict(data)
        listed = data.pop("Instances")
        kinds = (
            {i.get("InstanceType") for i in listed if isinstance(i, dict)}
            if isinstance(listed, list)
            else set()
        )
        if len(kinds) != 1 or "InstanceType" in data:
            raise ValueError(
                "Instances: give one InstanceType (Podium renders one node shape per "
                "compute resource; split the types into compute resources of their own)"
            )
        data["InstanceType"] = kinds.pop()
        return data

    @model_validator(mode="after")
    def _shape(self) -> ComputeResource:
        if self.MinCount > self.MaxCount:
            raise ValueError(f"MinCount {self.MinCount} exceeds MaxCount {self.MaxCount}")
        if self.InstanceType is None and self.Cpus is None:
            raise ValueError("give InstanceType, or Cpus (and MemoryMiB, Gpus) for the nodes")
        if self.InstanceType is not None and self.InstanceType not in INSTANCE_TYPES:
            known = ", ".join(sorted(INSTANCE_TYPES))
            raise ValueError(
                f"unknown InstanceType {self.InstanceType!r}: give Cpus/MemoryMiB/Gpus "
                f"instead, or one of {known}"
            )
        if self.Sharing.Mode != "none" and self.gpus()[0] == 0:
            raise ValueError(f"Sharing.Mode {self.Sharing.Mode} needs GPUs")
        if self.Sharing.Layout:
            _, kind = self.gpus()
            model = _mig_model(kind or "", self.Sharing.Layout)
            if model is None:
                raise ValueError(f"Sharing.Layout: GPU type {kind!r} has no MIG profiles")
            try:
                place(model, self.Sharing.Layout)
            except MigLayoutError as exc:
                raise ValueError(f"Sharing.Layout: {exc}") from None
        placed = [n for p in self.Network for n in p.positions(self.MaxCount)]
        if len(placed) != len(set(placed)):
            raise ValueError("Network: a node is placed twice: give each position once")
        return self

    def gpus(self) -> tuple[int, str | None]:
        """(count, type) of GPUs per node."""
        if self.Gpus is not None:
            return self.Gpus.Count, self.Gpus.Type
        if self.InstanceType is not None:
            _, _, count, kind = INSTANCE_TYPES[self.InstanceType]
            return count, kind
        return 0, None

    def gpu_devices(self) -> int:
        """GPU devices per node as Slurm counts them: one per GPU, or per MIG slice."""
        count, _ = self.gpus()
        slices = self.Sharing.slices()
        return count * len(slices) if slices else count

    def mig_gres(self) -> list[tuple[str, int]]:
        """(profile, slices per node) of a MIG node, in the layout's order."""
        count, _ = self.gpus()
        seen: dict[str, int] = {}
        for profile in self.Sharing.slices():
            seen[profile] = seen.get(profile, 0) + count
        return list(seen.items())

    def shared_gres(self) -> tuple[str, int] | None:
        """The sharing GRES per node and its count: mps (100 per GPU) or shard."""
        count, _ = self.gpus()
        if self.Sharing.Mode == "mps":
            return "mps", count * 100
        if self.Sharing.Mode == "shard":
            return "shard", count * self.Sharing.SharesPerGpu
        return None

    def cpus(self) -> int:
        if self.Cpus is not None:
            return self.Cpus
        return INSTANCE_TYPES[self.InstanceType or ""][0]

    def memory_mib(self) -> int:
        """RealMemory for slurm.conf: the given memory, or the instance's less a reserve."""
        if self.MemoryMiB is not None:
            return self.MemoryMiB
        if self.InstanceType is not None:
            return int(INSTANCE_TYPES[self.InstanceType][1] * (1 - MEMORY_RESERVE))
        return 1024


class Queue(Strict):
    """A Slurm partition and its compute resources."""

    Name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    Default: bool = False
    ComputeResources: list[ComputeResource] = Field(min_length=1)
    MaxTime: str = Field(default="INFINITE", pattern=r"^(INFINITE|[0-9:-]+)$")
    PriorityTier: int = Field(default=1, ge=0)


class HealthChecksSpec(Strict):
    """How Podium's health checks are wired into Slurm."""

    Enabled: bool = True
    Interval: int = Field(default=300, ge=1, description="HealthCheckInterval, seconds")
    Prolog: bool = True
    Epilog: bool = True


class SlurmSettingsSpec(Strict):
    ScaledownIdletime: int = Field(default=10, ge=1, description="minutes before power-down")
    HealthChecks: HealthChecksSpec = Field(default_factory=HealthChecksSpec)
    ResumeProgram: str | None = None
    SuspendProgram: str | None = None
    SlurmdTimeout: int = Field(default=300, ge=5)
    CredExpire: int = Field(default=120, ge=5, description="AuthInfo cred_expire, seconds")


class SchedulingSpec(Strict):
    Scheduler: Literal["slurm"] = "slurm"
    SlurmSettings: SlurmSettingsSpec = Field(default_factory=SlurmSettingsSpec)
    SlurmQueues: list[Queue] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> SchedulingSpec:
        names = [q.Name for q in self.SlurmQueues]
        if len(set(names)) != len(names):
            raise ValueError("queue names must be unique")
        if sum(q.Default for q in self.SlurmQueues) > 1:
            raise ValueError("at most one queue may be Default: true")
        return self


class SharedStorageSpec(Strict):
    Name: str
    MountDir: str = Field(pattern=r"^/[^\s,:]*$")
    StorageType: Literal[
        "Efs", "FsxLustre", "FsxOntap", "FsxOpenZfs", "FileCache", "Ebs", "Nfs"
    ] = "Nfs"


class ClusterDefinition(Strict):
    """The whole definition."""

    ClusterName: str = Field(default="podium", pattern=r"^[a-z][a-z0-9-]*$")
    HeadNode: HeadNodeSpec = Field(default_factory=HeadNodeSpec)
    Scheduling: SchedulingSpec
    SharedStorage: list[SharedStorageSpec] = Field(default_factory=list)
    Region: str | None = None
    Image: dict[str, str] | None = None

    @model_validator(mode="after")
    def _network(self) -> ClusterDefinition:
        check_layers(
            [
                (f"{q.Name}/{r.Name}", r.MaxCount, r.Network)
                for q in self.Scheduling.SlurmQueues
                for r in q.ComputeResources
            ]
        )
        return self


def network_levels(defn: ClusterDefinition) -> tuple[str, ...]:
    """The layers the definition places its nodes in, top first; () without any."""
    return levels_of(
        [p for q in defn.Scheduling.SlurmQueues for r in q.ComputeResources for p in r.Network]
    )


def load_definition(text: str, what: str) -> ClusterDefinition:
    """Parse and validate; raise ConfigError with one line per problem (path: message)."""
    return read_definition(text, what)[0]


def read_definition(text: str, what: str) -> tuple[ClusterDefinition, list[str]]:
    """Parse and validate a definition, ParallelCluster's own `cluster.yaml` included:
    its AWS-only settings (`aws_keys`) are set aside, each named in one warning line
    (returned); anything else unknown is an error. Raises ConfigError, one line: the
    first problem's path and message."""
    try:
        data = load_config_text(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: expected a mapping with Scheduling: SlurmQueues: [...]")
    aside = strip_aws_only(data)
    for found in unexpanded(data):
        raise ConfigError(
            f"{what}: {found} is an unexpanded template variable: substitute it first "
            "(as the seeds do: envsubst < cluster-template.yaml > cluster.yaml)"
        )
    try:
        definition = ClusterDefinition.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = re.sub(r"^Value error, ", "", err["msg"])
        raise ConfigError(f"{what}: {where}: {message}") from None
    warnings = [f"{what}: {path}: an AWS setting, not acted on here (left out of Slurm's files)"
                for path in aside]  # fmt: skip
    return definition, warnings
