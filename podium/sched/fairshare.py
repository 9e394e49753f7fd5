"""Fair share over a tree of accounts and users: Slurm's classic formula.

Each association (account or user) has `shares`. A user's normalised share is the
product, along the path from the root, of its shares over the sum of its siblings'.
Usage (GPU-seconds, plus CPU-seconds weighted by `cpu_weight`) decays with a half-life.
A user's effective usage is its account's usage share propagated as in Slurm's classic
algorithm: U_eff = U_user + (U_parent_eff - U_user) * S_user / S_siblings_total.
The factor is F = 2 ** (-U_eff / S_norm): 1 for an unused share, 0.5 when usage equals
the share, towards 0 above it. Pure functions; the store keeps the usage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Association:
    """An account (with children) or a user (a leaf) and its shares."""

    name: str
    shares: int = 1
    children: tuple[Association, ...] = field(default_factory=tuple)
    is_user: bool = False


@dataclass(frozen=True)
class ShareRow:
    """One line of `podium share` (like sshare)."""

    account: str
    user: str | None
    raw_shares: int
    norm_shares: float
    raw_usage: float
    effective_usage: float
    fairshare: float


def _usage(node: Association, usage: Mapping[tuple[str, str], float], account: str) -> float:
    if node.is_user:
        return usage.get((account, node.name), 0.0)
    return sum(_usage(c, usage, node.name) for c in node.children)


def fairshare_table(root: Association, usage: Mapping[tuple[str, str], float]) -> list[ShareRow]:
    """Every association's shares, usage and factor. `usage` maps (account, user) to
    decayed usage; users not in the tree are absent (and get factor 1 elsewhere)."""
    total = _usage(root, usage, root.name) or 0.0
    rows: list[ShareRow] = []

    def walk(node: Association, account: str, norm: float, parent_eff: float) -> None:
        sibling_total = sum(c.shares for c in node.children) or 1
        for child in node.children:
            child_norm = norm * child.shares / sibling_total
            raw = _usage(child, usage, node.name if child.is_user else child.name)
            u = raw / total if total > 0 else 0.0
            eff = u + (parent_eff - u) * child.shares / sibling_total
            factor = math.pow(2.0, -eff / child_norm) if child_norm > 0 else 0.0
            rows.append(
                ShareRow(
                    account=node.name if child.is_user else child.name,
                    user=child.name if child.is_user else None,
                    raw_shares=child.shares,
                    norm_shares=child_norm,
                    raw_usage=raw,
                    effective_usage=eff,
                    fairshare=factor,
                )
            )
            if not child.is_user:
                walk(child, child.name, child_norm, eff)

    walk(root, root.name, 1.0, 1.0 if total > 0 else 0.0)
    return rows


def user_factors(
    root: Association, usage: Mapping[tuple[str, str], float]
) -> dict[tuple[str, str], float]:
    """The fair-share factor of each (account, user) in the tree."""
    return {
        (r.account, r.user): r.fairshare for r in fairshare_table(root, usage) if r.user is not None
    }
