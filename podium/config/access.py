"""Config sections for who may use what and in which order: QoS levels, accounts,
user defaults, priority weights, fair share and the scheduler's limits."""

from __future__ import annotations

from collections.abc import Collection
from itertools import pairwise
from typing import Literal

from pydantic import Field, field_validator

from podium.api.timefmt import parse_duration
from podium.config.common import Closed


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
    weight_jobsize: float = Field(default=0, ge=0)  # as Slurm's default: off
    weight_partition: float = Field(default=1000000, ge=0)
    max_age: str = "7-00:00:00"
    favor_small: bool = False
    weight_shortness: float = Field(
        default=0, ge=0, description="shortest-first: weight of the requested GPU-time's "
        "level (GPUs x time limit, by powers of two); 0 is off (docs/scheduling.md)",
    )  # fmt: skip
    starve_after: str | None = Field(
        default=None, description="with weight_shortness: a job pending this long counts "
        "as the shortest (the starvation guard); none by default",
    )  # fmt: skip

    @field_validator("max_age")
    @classmethod
    def _valid_age(cls, value: str) -> str:
        parse_duration(value)
        return value

    @field_validator("starve_after")
    @classmethod
    def _valid_starve(cls, value: str | None) -> str | None:
        if value is not None and not parse_duration(value):
            raise ValueError(f"{value!r} is not a duration: give e.g. 6:00:00 or 1-00:00:00")
        return value


def seconds_of(value: str) -> float:
    """A duration in Slurm's time formats as seconds ("0" and "0:00" are none; ValueError
    for a malformed one)."""
    return 0.0 if value in ("0", "0:00") else float(parse_duration(value) or 0)


class ElasticConfig(Closed):
    """How elastic jobs are resized (durations in Slurm's time formats)."""

    min_stable: str = Field(
        default="5:00", description="a resized job is not shrunk again for a job of the "
        "same QoS before it has run this long at its size",
    )  # fmt: skip
    grow_delay: str = Field(
        default="1:00", description="a job grows into idle GPUs only after this long at its size"
    )

    @field_validator("min_stable", "grow_delay")
    @classmethod
    def _valid_time(cls, value: str) -> str:
        seconds_of(value)
        return value

    @staticmethod
    def seconds(value: str) -> float:
        return seconds_of(value)


class FairshareConfig(Closed):
    """Usage charged for fair share: GPU-seconds plus cpu_weight x CPU-seconds."""

    half_life: str = "7-00:00:00"
    cpu_weight: float = Field(default=0.0, ge=0)

    @field_validator("half_life")
    @classmethod
    def _valid_half_life(cls, value: str) -> str:
        parse_duration(value)
        return value


class LasConfig(Closed):
    """Least attained service (`scheduler.order: las`, docs/scheduling.md): queues by
    the GPU-seconds a job's runs have had, and preemption of jobs that checkpoint."""

    queue_limits: list[float] = Field(
        default=[4000.0], min_length=1, description="attained GPU-seconds at which a job "
        "moves to the next queue (ascending): a job with less goes first and may preempt",
    )  # fmt: skip
    min_run: str = Field(
        default="2:00:00", description="a job runs at least this long (each run) before "
        "least attained service may preempt it (the thrash bound)",
    )  # fmt: skip
    starve_factor: float | None = Field(
        default=0.5, ge=0, description="a waiting job that has waited this many times the "
        "time it ran goes back to the first queue (null: never)",
    )  # fmt: skip

    wait_factor: float | None = Field(
        default=0.25, gt=0, description="the wait guard: a job that later jobs have "
        "passed over and that has waited this many times its time limit (within wait_floor "
        "and wait_cap; its earlier stays in the queue counted) is overdue and goes before "
        "every job of its partition tier, QoS included, the earliest due first; while one "
        "waits, least attained service stops no job (null: no guard)",
    )  # fmt: skip
    wait_floor: str = Field(default="5:00", description="the wait guard's shortest wait")
    wait_cap: str = Field(
        default="1-0", description="the wait guard's longest wait (a job with no limit: this)"
    )

    @field_validator("queue_limits")
    @classmethod
    def _ascending(cls, value: list[float]) -> list[float]:
        if any(v <= 0 for v in value) or any(b <= a for a, b in pairwise(value)):
            raise ValueError(
                f"{value} are not ascending positive GPU-seconds: give e.g. [1000, 8000]"
            )
        return value

    @field_validator("min_run", "wait_floor", "wait_cap")
    @classmethod
    def _valid_duration(cls, value: str) -> str:
        seconds_of(value)
        return value

    @property
    def min_run_s(self) -> float:
        return seconds_of(self.min_run)

    @property
    def wait_floor_s(self) -> float:
        return seconds_of(self.wait_floor)

    @property
    def wait_cap_s(self) -> float:
        return seconds_of(self.wait_cap)


class SchedulerConfig(Closed):
    """What scheduling passes may do."""

    backfill: bool = True
    preemption: bool = True
    order: Literal["multifactor", "las"] = Field(
        default="las", description="the queue's order: multifactor priority (as "
        "Slurm), or least attained service (las: preemptive, Tiresias' 2D-LAS)",
    )  # fmt: skip
    las: LasConfig = Field(default_factory=LasConfig)
    preempt_exempt_time: str = Field(default="0:00", description="minimum run before preemption")
    preempt_victims: Literal["least_lost_work", "least_runtime"] = Field(
        default="least_lost_work",
        description="which running jobs preemption and shrinking stop: those that lose the "
        "least work since their last checkpoint, or (as Slurm) the least runtime",
    )

    @field_validator("preempt_exempt_time")
    @classmethod
    def _valid_exempt(cls, value: str) -> str:
        seconds_of(value)
        return value

    @property
    def preempt_exempt_s(self) -> float:
        return seconds_of(self.preempt_exempt_time)
