"""Find the slow node(s) of a set by running the NCCL yardstick on parts of it (pure:
the runs are made by a callable passed in).

The whole set runs first. When it is slow (or fails), the set is halved and both
halves run at once; each slow half is halved again, down to pairs. The nodes of a slow
pair (and a node left alone by an odd split) are then each run beside a node already
known good. Slow beside a good node accuses the node; it is convicted only when a
second run, beside another good node where there is one, is slow too (the convicting
run's figure is kept): one slow run can be noise (a busy host, a retransmit), and a
conviction drains a node. An accused node that runs at speed the second time is good.
When no good node is known yet, suspects are paired among themselves in pairs not
tried before; a suspect that can be paired with no good node in the end is reported
unresolved (two nodes alone cannot tell which of them is slow: `spare` nodes known good
help there).

Runs of one round are on disjoint nodes, so they can run at the same time. With one slow
node among N = 2^k, this takes 2k + 2 runs in k + 2 rounds (4 nodes: 6 runs, 4 rounds;
8: 8 runs; 16: 10 runs, 6 rounds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

Group = tuple[str, ...]


@dataclass(frozen=True)
class Measured:
    """What one yardstick run on a group gave: its bus bandwidth (None: it failed) and
    a note for people (the job, why it failed)."""

    busbw: float | None
    note: str = ""


@dataclass(frozen=True)
class Run:
    round: int
    nodes: Group
    measured: Measured
    slow: bool


# Runs the groups (disjoint) at once; one Measured per group, in order.
Measure = Callable[[list[Group]], list[Measured]]


@dataclass
class Bisection:
    runs: list[Run] = field(default_factory=list)
    bad: dict[str, Run] = field(default_factory=dict)  # node -> the run that convicted it
    accused: dict[str, Run] = field(default_factory=dict)  # node -> its first slow run
    unresolved: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """The whole set ran at speed."""
        return bool(self.runs) and not self.runs[0].slow

    @property
    def rounds(self) -> int:
        return max((r.round for r in self.runs), default=0)


def find_slow_nodes(
    nodes: Sequence[str],
    measure: Measure,
    is_slow: Callable[[Measured], bool],
    spare: Sequence[str] = (),
) -> Bisection:
    """Run the yardstick on `nodes`, then bisect as the module says. `spare` nodes are
    known good: used only as partners for suspects, never judged."""
    result = Bisection()
    good: list[str] = [n for n in spare if n not in nodes]
    tried: set[frozenset[str]] = set()

    def run_round(groups: list[Group]) -> list[Run]:
        number = result.rounds + 1
        tried.update(frozenset(g) for g in groups)
        runs = [Run(number, g, m, is_slow(m)) for g, m in zip(groups, measure(groups), strict=True)]
        result.runs += runs
        for run in runs:
            if not run.slow:
                good.extend(n for n in run.nodes if n not in good)
        return runs

    whole = tuple(dict.fromkeys(nodes))
    if not run_round([whole])[0].slow:
        return result
    slow_groups: list[Group] = [whole]
    suspects: list[str] = []
    while slow_groups or suspects:
        groups: list[Group] = []
        for group in slow_groups:
            if len(group) <= 2:
                suspects += [n for n in group if n not in suspects]
                continue
            half = len(group) // 2
            for part in (group[:half], group[half:]):
                if len(part) == 1:
                    suspects.append(part[0])
                else:
                    groups.append(part)
        slow_groups = []
        busy = {n for g in groups for n in g}
        partners = [n for n in good if n not in busy and n not in result.bad]
        crossed: set[Group] = set()
        waiting: list[str] = []
        for node in suspects:
            if node in good or node in result.bad:
                continue
            if partners:
                partner = _fresh_partner(node, partners, tried)
                partners.remove(partner)
                groups.append((node, partner))
                crossed.add((node, partner))
            else:
                waiting.append(node)
        suspects = waiting
        if not groups:  # no good partner: pair suspects in pairs not tried yet
            groups = _untried_pairs(suspects, tried)
            if not groups:
                break
        for run in run_round(groups):
            if run.slow and run.nodes in crossed:
                accused = run.nodes[0]
                if accused in result.accused:
                    result.bad[accused] = run
                else:
                    result.accused[accused] = run
                    suspects.append(accused)
            elif run.slow and len(run.nodes) > 2:
                slow_groups.append(run.nodes)
            elif run.slow:
                suspects += [n for n in run.nodes if n not in suspects]
        suspects = [n for n in suspects if n not in good and n not in result.bad]
    result.unresolved = [n for n in suspects if n not in good and n not in result.bad]
    return result


def _fresh_partner(node: str, partners: list[str], tried: set[frozenset[str]]) -> str:
    """The first partner never run beside `node`, else the first."""
    return next((p for p in partners if frozenset((node, p)) not in tried), partners[0])


def _untried_pairs(suspects: list[str], tried: set[frozenset[str]]) -> list[Group]:
    """Disjoint pairs of suspects never run together (greedy, in order)."""
    pairs: list[Group] = []
    used: set[str] = set()
    for i, a in enumerate(suspects):
        if a in used:
            continue
        for b in suspects[i + 1 :]:
            if b not in used and frozenset((a, b)) not in tried:
                pairs.append((a, b))
                used.update((a, b))
                break
    return pairs
