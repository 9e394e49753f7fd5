"""The cluster config: the node and its inventory, partitions, QoS levels, limits.

A closed schema (unknown keys are errors with a did-you-mean hint), loaded from YAML.
`default_config()` is what `podium up` writes on first start.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from podium.config.access import (
    Account,
    ElasticConfig,
    FairshareConfig,
    PriorityConfig,
    Qos,
    SchedulerConfig,
    UserDefaults,
    UserShare,
)
from podium.config.common import Closed
from podium.config.hardware import GpuInventory, GpuSharing, NodeConfig, Partition
from podium.config.http_config import HttpListener
from podium.config.operations import (
    GpuTypeThresholds,
    HealthConfig,
    KubernetesAccess,
    ResumeConfig,
    SlurmAccess,
)
from podium.config.team_config import Team, check_teams
from podium.config.validation import one_line
from podium.config.yaml_text import load_config_text
from podium.errors import ConfigError

__all__ = [
    "Account",
    "Closed",
    "ClusterConfig",
    "ElasticConfig",
    "FairshareConfig",
    "GpuInventory",
    "GpuSharing",
    "GpuTypeThresholds",
    "HealthConfig",
    "KubernetesAccess",
    "NodeConfig",
    "Partition",
    "PriorityConfig",
    "Qos",
    "ResumeConfig",
    "SchedulerConfig",
    "SlurmAccess",
    "Team",
    "UserDefaults",
    "UserShare",
    "default_config",
    "dump_config",
    "load_config",
    "parse_config",
]


class ClusterConfig(Closed):
    """The whole cluster config."""

    cluster_name: str = "podium"
    backend: Literal["embedded", "slurm", "kubernetes"] = Field(
        default="embedded",
        description="embedded: this machine, run by podiumd; slurm: submit to a Slurm "
        "cluster; kubernetes: submit to Kueue on a Kubernetes cluster",
    )
    slurm: SlurmAccess = Field(default_factory=SlurmAccess)
    kubernetes: KubernetesAccess = Field(default_factory=KubernetesAccess)
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
        default_factory=list,
        description="accounts and their shares; empty: each user charges their own default "
        "account (and their teams'), unless open_accounts",
    )
    open_accounts: bool = Field(
        default=False,
        description="with no accounts listed, let any user charge any account name (a lab "
        "that uses accounts as free labels); off, a user may charge only their own",
    )
    users: list[UserDefaults] = Field(
        default_factory=list, description="per-user defaults (default_account)"
    )
    teams: list[Team] = Field(
        default_factory=list,
        description="team GPU quotas that lend and borrow within a cohort (none: no quotas)",
    )
    http: HttpListener = Field(default_factory=HttpListener)
    team_fair_sharing: bool = Field(
        default=False,
        description="teams borrow idle quota by weight (the least borrowed per weight first, "
        "and may preempt a team further over its share) rather than in priority order: "
        "Kueue's fair sharing, HyperPod's fair-share mode",
    )
    priority: PriorityConfig = Field(default_factory=PriorityConfig)
    fairshare: FairshareConfig = Field(default_factory=FairshareConfig)
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    elastic: ElasticConfig = Field(default_factory=ElasticConfig)
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
    runtime_dir: str = Field(
        default="auto",
        pattern=r"^(auto|home|/.*)$",
        description="where running jobs' state lives (Slurm's SlurmdSpoolDir): auto (a "
        "tmpfs when the daemon runs as root: /run/podium, else /dev/shm/podium-0; "
        "HOME/jobs otherwise), home (HOME/jobs on the state disk) or an absolute path; "
        "HOME/jobs always leads there. A change takes effect at a start with no job running",
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
        check_teams(self.teams, account_names)
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
            "accounts": [a.name for a in accounts]
            if self.accounts
            else (None if self.open_accounts else self.own_accounts(user)),
            "default_account": self.default_account(user),
            "qos": qos,
            "default_qos": self.default_qos,
            "account_qos": {
                a.name: [q for q in qos if q in a.allow_qos] for a in accounts if a.allow_qos
            },
        }

    def may_charge(self, user: str, account: str) -> bool:
        """Whether `user` may charge `account` when none are configured (listed
        accounts say for themselves, `Account.open_to`): their default account, a
        team's account that names them, or any under `open_accounts`."""
        return bool(self.accounts) or self.open_accounts or account in self.own_accounts(user)

    def own_accounts(self, user: str) -> list[str]:
        """With no accounts configured: the user's default account and the accounts of
        the teams that name them."""
        teams = [a for t in self.teams if user in t.users for a in t.accounts]
        return list(dict.fromkeys([self.default_account(user), *teams]))

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


def parse_config(text: str, what: str) -> ClusterConfig:
    """Parse and validate YAML config text; raise ConfigError with one line."""
    try:
        data = load_config_text(text) or {}
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
