"""What runs cost in fair share and what a stopped run becomes: the transition rules
the embedded daemon's reactor and the simulator share, one definition each. Pure: no
I/O, the clock passed in.

- A run is charged GPU-seconds plus `cpu_weight` x CPU-seconds (`run_usage`) when it
  ends or is stopped; while it runs, what it has used so far counts as well
  (`live_usage`).
- Charged usage decays with a half-life. Each (account, user) keeps its value and the
  time it was last brought up to date; a charge decays the old value to the charge's
  time and adds (`podium.api.usage.charged`). The daemon keeps these pairs in SQLite,
  the simulator in a `UsageLedger`: the same arithmetic.
- The fair-share tree is root -> accounts -> users, each with its shares; an (account,
  user) seen in jobs or usage but not configured has one share (`share_tree`).
- A preempted run is queued again only when its preempt mode is REQUEUE and the job
  may be requeued; otherwise it ends PREEMPTED (`requeued_after_preemption`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from podium.api.states import PreemptMode
from podium.api.usage import charged, decay
from podium.sched.fairshare import Association
from podium.sched.model import Allocation

UserKey = tuple[str, str]  # (account, user)


def run_usage(elapsed_s: float, gpus: float, cpus: int, cpu_weight: float) -> float:
    """What `elapsed_s` of a run holding `gpus` (parts of GPUs by their fraction) and
    `cpus` costs (never negative)."""
    return max(0.0, elapsed_s) * (gpus + cpu_weight * cpus)


def allocation_usage(alloc: Allocation, now: float, cpu_weight: float) -> float:
    """What one running allocation has used from its start until `now`."""
    return run_usage(now - alloc.start_time, alloc.gpu_amount, alloc.cpus, cpu_weight)


def live_usage(
    stored: Mapping[UserKey, float],
    running: Iterable[Allocation],
    now: float,
    cpu_weight: float,
) -> dict[UserKey, float]:
    """Decayed `stored` usage plus what the running allocations have used so far (a
    new dict; `stored` is not changed)."""
    usage = dict(stored)
    get = usage.get
    for a in running:  # run_usage inlined: every pass calls this for every allocation
        key = (a.account, a.user)
        gpus = len(a.gpu_indices) if a.gpu_units is None else a.gpu_units
        usage[key] = get(key, 0.0) + max(0.0, now - a.start_time) * (gpus + cpu_weight * a.cpus)
    return usage


class UsageLedger:
    """Decayed usage per (account, user) in memory, kept as the daemon's store keeps
    it: a value and the time it was last brought up to date."""

    def __init__(self, half_life_s: float) -> None:
        self.half_life_s = half_life_s
        self._kept: dict[UserKey, tuple[float, float]] = {}

    def charge(self, key: UserKey, amount: float, now: float) -> None:
        """Add `amount` to `key`'s usage at `now`."""
        value, updated = self._kept.get(key, (None, now))
        self._kept[key] = (charged(value, updated, amount, now, self.half_life_s), now)

    def at(self, now: float) -> dict[UserKey, float]:
        """Every charged (account, user)'s usage, decayed to `now`."""
        return {k: decay(v, now - t, self.half_life_s) for k, (v, t) in self._kept.items()}

    def keys(self) -> set[UserKey]:
        return set(self._kept)


def share_tree(
    account_shares: Mapping[str, int],
    user_shares: Mapping[str, Mapping[str, int]],
    seen: Iterable[UserKey],
) -> Association:
    """root -> accounts -> users: the configured ones with their shares (accounts in
    `account_shares`, users per account in `user_shares`), then every (account, user)
    in `seen` not configured, with one share, in the order seen."""
    users: dict[str, dict[str, int]] = {a: dict(us) for a, us in user_shares.items()}
    for account in account_shares:
        users.setdefault(account, {})
    for account, user in seen:
        users.setdefault(account, {}).setdefault(user, 1)
    return Association(
        "root",
        children=tuple(
            Association(
                name,
                account_shares.get(name, 1),
                children=tuple(Association(u, s, is_user=True) for u, s in members.items()),
            )
            for name, members in users.items()
        ),
    )


def requeued_after_preemption(mode: PreemptMode | str | None, may_requeue: bool) -> bool:
    """Whether a preempted run goes back to the queue (else it ends PREEMPTED). No mode
    recorded means REQUEUE, the default."""
    return may_requeue and PreemptMode(mode or PreemptMode.REQUEUE) == PreemptMode.REQUEUE


__all__ = [
    "UsageLedger",
    "allocation_usage",
    "live_usage",
    "requeued_after_preemption",
    "run_usage",
    "share_tree",
]
