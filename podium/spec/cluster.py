"""The cluster config: the node and its inventory, partitions, QoS levels, limits.

A closed schema (unknown keys are errors with a did-you-mean hint), loaded from YAML.
`default_config()` is what `podium up` writes on first start.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from podium.errors import ConfigError
from podium.spec.timefmt import parse_duration
from podium.spec.validation import one_line


class Closed(BaseModel):
    """Base for config models: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")


class GpuInventory(Closed):
    """Where the node's GPUs come from.

    source "nvml" reads them from the driver; "declared" trusts count/type/memory
    (for machines without a GPU: everything above the inventory is the real path);
    "auto" uses NVML when it answers and the declaration otherwise.
    """

    source: Literal["auto", "nvml", "declared"] = "auto"
    count: int = Field(default=0, ge=0, le=64)
    type: str = Field(default="gpu", pattern=r"^[A-Za-z0-9_.-]+$")
    memory_mb: int = Field(default=0, ge=0)
    devices: list[str] = Field(
        default_factory=list,
        description="declared GPUs: each one's device file (one per GPU), so that a job "
        "cannot open a GPU it was not given; NVML GPUs use /dev/nvidiaN",
    )
    topology: list[list[int]] = Field(
        default_factory=list,
        description="groups of GPU indices behind one NVLink domain or PCIe switch "
        "(declared GPUs; NVML-detected GPUs are grouped from the driver's topology)",
    )

    @model_validator(mode="after")
    def _topology_in_range(self) -> GpuInventory:
        flat = [i for group in self.topology for i in group]
        if len(flat) != len(set(flat)):
            raise ValueError("a GPU may be in only one topology group")
        if self.source == "declared" and any(not 0 <= i < self.count for i in flat):
            raise ValueError(f"topology names GPUs outside 0..{self.count - 1}")
        if self.devices and len(self.devices) != self.count:
            raise ValueError(
                f"devices lists {len(self.devices)} files for {self.count} GPUs: give one each"
            )
        return self


class NodeConfig(Closed):
    """The one node of the embedded cluster."""

    name: str = Field(default_factory=lambda: socket.gethostname().split(".")[0] or "node0")
    cpus: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    memory_mb: int = Field(default_factory=lambda: _detected_memory_mb(), ge=1)
    features: list[str] = Field(default_factory=list)
    gpus: GpuInventory = Field(default_factory=GpuInventory)


class Partition(Closed):
    """A queue of the cluster, with its time limits and priority tier."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    default: bool = False
    priority_tier: int = Field(default=0, ge=0)
    nodes: list[str] = Field(default_factory=list, description="its nodes; empty: all")
    default_time: str | None = None
    max_time: str = "UNLIMITED"

    @field_validator("default_time", "max_time")
    @classmethod
    def _valid_time(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value

    @property
    def max_time_s(self) -> int | None:
        return parse_duration(self.max_time)

    @property
    def default_time_s(self) -> int | None:
        return parse_duration(self.default_time) if self.default_time else self.max_time_s


class Qos(Closed):
    """A quality-of-service level: its priority, whom it may preempt, how its own jobs
    are preempted, and per-user limits (Slurm's QOS record)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    priority: int = Field(ge=0)
    preempt: list[str] = Field(default_factory=list, description="QoS this one may preempt")
    preempt_mode: Literal["requeue", "cancel"] = "requeue"
    max_gpus_per_user: int | None = Field(default=None, ge=0)
    max_jobs_per_user: int | None = Field(default=None, ge=0)
    max_submit_jobs_per_user: int | None = Field(default=None, ge=0)
    allow_users: list[str] = Field(
        default_factory=list, description="users who may submit with it (both empty: anyone)"
    )
    allow_groups: list[str] = Field(
        default_factory=list, description="Unix groups whose members may submit with it"
    )

    def open_to(self, user: str, groups: Collection[str]) -> bool:
        """Whether `user` (a member of `groups`) may use this QoS."""
        return _allowed(self.allow_users, self.allow_groups, user, groups)


class UserShare(Closed):
    """A user inside an account, with its shares."""

    name: str
    shares: int = Field(default=1, ge=0)


class Account(Closed):
    """An account with its shares, its members, the QoS its jobs may use, and a GPU cap
    for the whole group (Slurm's account associations)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.@-]+$")
    shares: int = Field(default=1, ge=0)
    users: list[UserShare] = Field(
        default_factory=list, description="members (with allow_groups both empty: any user)"
    )
    allow_groups: list[str] = Field(
        default_factory=list, description="Unix groups whose members may charge it"
    )
    allow_qos: list[str] = Field(
        default_factory=list, description="QoS its jobs may use (AllowQos; empty: any)"
    )
    max_gpus: int | None = Field(default=None, ge=0)

    def open_to(self, user: str, groups: Collection[str]) -> bool:
        """Whether `user` (a member of `groups`) may charge jobs to this account."""
        return _allowed([u.name for u in self.users], self.allow_groups, user, groups)


class UserDefaults(Closed):
    """A user's defaults (Slurm's DefaultAccount)."""

    name: str
    default_account: str


def _allowed(users: list[str], groups: list[str], user: str, member_of: Collection[str]) -> bool:
    if not users and not groups:
        return True
    return user in users or any(g in member_of for g in groups)


class PriorityConfig(Closed):
    """Weights of the multifactor priority (Slurm's PriorityWeight*)."""

    weight_age: float = Field(default=1000, ge=0)
    weight_fairshare: float = Field(default=10000, ge=0)
    weight_qos: float = Field(default=100000, ge=0)
    weight_jobsize: float = Field(default=1000, ge=0)
    weight_partition: float = Field(default=1000000, ge=0)
    max_age: str = "7-00:00:00"
    favor_small: bool = False

    @field_validator("max_age")
    @classmethod
    def _valid_age(cls, value: str) -> str:
        parse_duration(value)
        return value


class FairshareConfig(Closed):
    """Usage charged for fair share: GPU-seconds plus cpu_weight x CPU-seconds."""

    half_life: str = "7-00:00:00"
    cpu_weight: float = Field(default=0.0, ge=0)

    @field_validator("half_life")
    @classmethod
    def _valid_half_life(cls, value: str) -> str:
        parse_duration(value)
        return value


class SchedulerConfig(Closed):
    """What scheduling passes may do."""

    backfill: bool = True
    preemption: bool = True
    preempt_exempt_time: str = Field(default="0:00", description="minimum run before preemption")

    @field_validator("preempt_exempt_time")
    @classmethod
    def _valid_exempt(cls, value: str) -> str:
        if value not in ("0", "0:00"):
            parse_duration(value)
        return value

    @property
    def preempt_exempt_s(self) -> float:
        if self.preempt_exempt_time in ("0", "0:00"):
            return 0.0
        return float(parse_duration(self.preempt_exempt_time) or 0)


class GpuTypeThresholds(Closed):
    """Health thresholds for one GPU type."""

    max_temperature_c: int = Field(default=84, ge=0)
    max_retired_pages: int = Field(default=10, ge=0)
    nccl_busbw_gbps: float | None = Field(default=None, gt=0)


class HealthConfig(Closed):
    """What `podium health` checks and against which thresholds."""

    kernel_log: str | None = Field(default=None, description="file with kernel messages (Xid)")
    disk_paths: list[str] = Field(default_factory=list, description="default: / and PODIUM_HOME")
    max_disk_used_percent: float = Field(default=83.0, gt=0, le=100)
    required_mounts: list[str] = Field(default_factory=list)
    nccl_output: str | None = Field(default=None, description="nccl-tests output to judge")
    dcgm_level: int = Field(default=1, ge=1, le=4, description="podium health --deep")
    dcgm_level_after_failure: int = Field(default=2, ge=1, le=4)
    dcgm_level_idle: int = Field(default=3, ge=1, le=4, description="also before return")
    burn_in_seconds: float = Field(default=5.0, gt=0, description="PyTorch GPU burn-in length")
    recovery: Literal["automatic", "none"] = Field(
        default="automatic",
        description="automatic: fence, reset or reboot, re-check, return to service; "
        "none: only label faults (HyperPod's node recovery modes)",
    )
    interval_s: float = Field(default=30.0, gt=0, description="quick checks run this often")
    deep_interval_s: float = Field(
        default=3600.0, gt=0, description="deep checks run this often on an idle node"
    )
    reset_command: str | None = Field(
        default=None,
        description="resets one GPU; {gpu} is its index (e.g. nvidia-smi --gpu-reset -i {gpu})",
    )
    reboot_command: str | None = Field(
        default=None, description="reboots the node (run only once it has no jobs)"
    )
    action_timeout_s: float = Field(default=300.0, gt=0)
    retry_s: float = Field(default=300.0, gt=0, description="wait after a failed deep check")
    max_faults: int = Field(
        default=3, ge=1, description="faults within fault_window_s that mark for replacement"
    )
    fault_window_s: float = Field(default=86400.0, gt=0)

    def remedy_argv(self, remedy: Literal["reset", "reboot"], gpu: int | None) -> list[str]:
        """The argv of the reset or reboot command, `{gpu}` filled with the GPU index.

        Split like a shell would, but never run by one: nothing in it is expanded, and
        the only value put in is an integer. Raises ConfigError when none is configured.
        """
        template = self.reset_command if remedy == "reset" else self.reboot_command
        if not template:
            raise ConfigError(f"health.{remedy}_command is not configured")
        return shlex.split(template.replace("{gpu}", "" if gpu is None else str(int(gpu))))

    thresholds: dict[str, GpuTypeThresholds] = Field(
        default_factory=lambda: {
            "h100": GpuTypeThresholds(nccl_busbw_gbps=460.0),
            "h200": GpuTypeThresholds(nccl_busbw_gbps=460.0),
            "a100": GpuTypeThresholds(nccl_busbw_gbps=228.0),
        }
    )


class ResumeConfig(Closed):
    """Cluster defaults for auto-resume (a job's own options win)."""

    auto_resume: int = Field(default=0, ge=0, description="restarts after a fault, by default")
    requeue_exit_codes: list[int] = Field(
        default_factory=list, description="exit codes that mean 'a fault: requeue me'"
    )
    no_requeue_exit_codes: list[int] = Field(
        default_factory=list, description="exit codes that mean 'do not requeue'"
    )
    max_restarts_without_progress: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _codes(self) -> ResumeConfig:
        codes = self.requeue_exit_codes + self.no_requeue_exit_codes
        if any(not 0 <= c <= 255 for c in codes):
            raise ValueError("exit codes are 0-255")
        if 0 in self.requeue_exit_codes:
            raise ValueError("requeue_exit_codes: exit code 0 means success, it cannot requeue")
        both = set(self.requeue_exit_codes) & set(self.no_requeue_exit_codes)
        if both:
            raise ValueError(f"exit code {min(both)} is in both requeue lists: pick one")
        return self


class SlurmAccess(Closed):
    """How Podium reaches a Slurm cluster (backend: slurm)."""

    via: Literal["cli", "rest"] = Field(
        default="cli",
        description="Slurm's CLI tools (sbatch, squeue --json, ...) or slurmrestd for reads",
    )
    conf: str | None = Field(default=None, description="SLURM_CONF for the CLI tools")
    bin_dir: str | None = Field(default=None, description="where sbatch etc. live; PATH if unset")
    rest_url: str | None = Field(
        default=None, description="slurmrestd: http://HOST:PORT or unix:/PATH (via: rest)"
    )
    rest_user: str | None = Field(default=None, description="X-SLURM-USER-NAME for JWT auth")
    rest_token_env: str = Field(
        default="SLURM_TESTBED_JWT", description="environment variable holding the JWT"
    )
    api_version: str = Field(default="v0.0.38", pattern=r"^v\d+\.\d+\.\d+$")
    python: str | None = Field(
        default=None,
        description="the Python with Podium installed on the compute nodes (default: this one)",
    )
    state_dir: str | None = Field(
        default=None,
        description="shared directory for checkpoints and health state (default: PODIUM_HOME)",
    )

    @model_validator(mode="after")
    def _rest_needs_url(self) -> SlurmAccess:
        if self.via == "rest" and not self.rest_url:
            raise ValueError(
                "slurm.via: rest needs slurm.rest_url (http://HOST:PORT or unix:/PATH)"
            )
        return self


class ClusterConfig(Closed):
    """The whole cluster config."""

    cluster_name: str = "podium"
    backend: Literal["embedded", "slurm"] = Field(
        default="embedded",
        description="embedded: this machine, run by podiumd; slurm: submit to a Slurm cluster",
    )
    slurm: SlurmAccess = Field(default_factory=SlurmAccess)
    node: NodeConfig = Field(default_factory=NodeConfig)
    partitions: list[Partition] = Field(
        default_factory=lambda: [Partition(name="main", default=True)], min_length=1
    )
    qos: list[Qos] = Field(
        default_factory=lambda: [
            Qos(name="high", priority=1000),
            Qos(name="normal", priority=100),
            Qos(name="low", priority=10),
        ],
        min_length=1,
    )
    default_qos: str = "normal"
    accounts: list[Account] = Field(
        default_factory=list, description="accounts and their shares; empty means any account"
    )
    users: list[UserDefaults] = Field(
        default_factory=list, description="per-user defaults (default_account)"
    )
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    fairshare: FairshareConfig = Field(default_factory=FairshareConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    health: HealthConfig = Field(default_factory=HealthConfig)
    resume: ResumeConfig = Field(default_factory=ResumeConfig)
    kill_wait_s: float = Field(default=30.0, ge=0, description="SIGTERM to SIGKILL grace")
    default_mem_per_cpu_mb: int | None = Field(default=None, ge=1)
    scheduler_interval_s: float = Field(default=0.5, gt=0, le=60)
    mail_command: str | None = None
    max_array_size: int = Field(
        default=1001,
        ge=1,
        le=4_000_001,
        description="array indices must be below this, and so must their number "
        "(Slurm's MaxArraySize)",
    )
    proctrack: Literal["auto", "cgroup", "subreaper"] = Field(
        default="auto",
        description="how job processes are tracked (like Slurm's ProctrackType): a cgroup v2 "
        "per job where possible plus subreaper tracking (auto), cgroup required, or "
        "subreaper tracking alone",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ClusterConfig:
        names = [p.name for p in self.partitions]
        if len(set(names)) != len(names):
            raise ValueError("partition names must be unique")
        if sum(p.default for p in self.partitions) > 1:
            raise ValueError("at most one partition may be the default")
        qos_names = [q.name for q in self.qos]
        if len(set(qos_names)) != len(qos_names):
            raise ValueError("QoS names must be unique")
        if self.default_qos not in qos_names:
            raise ValueError(f"default_qos {self.default_qos!r} is not one of {qos_names}")
        for q in self.qos:
            for other in q.preempt:
                if other not in qos_names or other == q.name:
                    raise ValueError(
                        f"QoS {q.name} may preempt only other QoS of {qos_names}, not {other!r}"
                    )
        for p in self.partitions:
            unknown = [n for n in p.nodes if n != self.node.name]
            if unknown:
                raise ValueError(
                    f"partition {p.name} names unknown node(s) {unknown}: this cluster's node "
                    f"is {self.node.name!r}"
                )
        account_names = [a.name for a in self.accounts]
        if len(set(account_names)) != len(account_names):
            raise ValueError("account names must be unique")
        for a in self.accounts:
            unknown_qos = [q for q in a.allow_qos if q not in qos_names]
            if unknown_qos:
                raise ValueError(f"account {a.name} allows unknown QoS {unknown_qos}")
        for u in self.users:
            if account_names and u.default_account not in account_names:
                raise ValueError(
                    f"user {u.name}'s default_account {u.default_account!r} is not one of "
                    f"{account_names}"
                )
        return self

    @property
    def names_groups(self) -> bool:
        """Whether any QoS or account allow-list names Unix groups (only then must a
        submitter's groups be looked up)."""
        return any(q.allow_groups for q in self.qos) or any(a.allow_groups for a in self.accounts)

    def default_account(self, user: str) -> str:
        """The account a user's jobs are charged to when they name none: the configured
        default, else the user's own name (an account of one)."""
        return next((u.default_account for u in self.users if u.name == user), user)

    def access(self, user: str, groups: Collection[str]) -> dict[str, Any]:
        """What `user` may use: its accounts (all when none are configured), its
        default account, and the QoS levels open to it (per account when an account
        restricts them)."""
        qos = [q.name for q in self.qos if q.open_to(user, groups)]
        accounts = [a for a in self.accounts if a.open_to(user, groups)]
        return {
            "user": user,
            "accounts": [a.name for a in accounts] if self.accounts else None,
            "default_account": self.default_account(user),
            "qos": qos,
            "default_qos": self.default_qos,
            "account_qos": {
                a.name: [q for q in qos if q in a.allow_qos] for a in accounts if a.allow_qos
            },
        }

    def account(self, name: str) -> Account | None:
        return next((a for a in self.accounts if a.name == name), None)

    @property
    def default_partition(self) -> Partition:
        return next((p for p in self.partitions if p.default), self.partitions[0])

    def partition(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name == name), None)

    def qos_level(self, name: str) -> Qos | None:
        return next((q for q in self.qos if q.name == name), None)

    @property
    def mem_per_cpu_mb(self) -> int:
        """Memory given per CPU when a job does not ask (like Slurm's DefMemPerCPU)."""
        if self.default_mem_per_cpu_mb:
            return self.default_mem_per_cpu_mb
        return max(1, self.node.memory_mb // self.node.cpus)


def _detected_memory_mb() -> int:
    import psutil

    return int(psutil.virtual_memory().total // (1024 * 1024))


def parse_config(text: str, what: str) -> ClusterConfig:
    """Parse and validate YAML config text; raise ConfigError with one line."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{what}: not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what}: expected a mapping of keys at the top level")
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(one_line(exc, ClusterConfig, what)) from None


def load_config(path: Path) -> ClusterConfig:
    """Load the config at `path`; raise ConfigError when it is unreadable or invalid."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cluster config {path}: cannot read: {exc.strerror}") from None
    return parse_config(text, f"cluster config {path}")


def default_config(gpus: int = 0, cpus: int | None = None) -> ClusterConfig:
    """The config `podium up` writes on first start (GPUs declared if asked)."""
    node = NodeConfig()
    if cpus is not None:
        node.cpus = cpus
    if gpus:
        node.gpus = GpuInventory(source="declared", count=gpus, type="gpu", memory_mb=81920)
    return ClusterConfig(node=node)


def dump_config(config: ClusterConfig) -> str:
    """Render `config` as YAML, with a header saying what the file is."""
    body = yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)
    return "# Podium cluster config. Unknown keys are errors.\n" + body
