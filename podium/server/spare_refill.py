"""Spares refilled while the job runs: after a replacement (podium.run.replace) the job
gives back the GPU it was fenced on and takes a free one as its new spare, so that the
next fault finds a spare too (a pool used up is worth nothing: docs/resiliency.md).

The refill comes from GPUs free at that moment and healthy, those that passed their
last deep check first; it goes before the queue, as the job asked for its spares when it
started. Declared GPUs only: on real GPUs the job's device cgroup, fixed at its start,
denies every GPU it did not hold then, so a running job is given no new GPU there (the
fenced GPU is still given back).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from podium.api.health import Health, Label
from podium.jobspec.job import ElasticSpec
from podium.server.effects import RunControl
from podium.server.job_rows import gpu_owners, held_units
from podium.server.local_node import LocalNode
from podium.store.db import Row, Store
from podium.store.health_table import HealthTable

log = logging.getLogger("podium.spares")


class SpareRefill:
    """Keeps each running job with spares at its spares' count, where GPUs allow."""

    def __init__(
        self,
        store: Store,
        node: LocalNode,
        health: HealthTable,
        runs: RunControl,
        running: Callable[[], list[Row]],
    ) -> None:
        self.running = running  # the running jobs' rows
        self.store = store
        self.node = node
        self.health = health
        self.runs = runs  # tells the job's supervisor of new spares (add_spares)
        self.looked: dict[int, tuple[float, int]] = {}  # job -> (its run's start, handled)

    def _handled(self, job_id: int, start: float, replaced: list[dict[str, Any]]) -> int:
        """How many of a run's replacements an earlier look handled (before a daemon
        restart): those up to its last `spares` event."""
        swaps = [
            float(e["time"])
            for e in self.store.events(job_id)
            if e["kind"] == "spares" and float(e["time"]) >= start
        ]
        if not swaps:
            return 0
        return sum(1 for r in replaced if float(r.get("time") or 0.0) <= max(swaps))

    def check(
        self,
        row: Row,
        elastic: ElasticSpec,
        replaced: Iterable[dict[str, Any]],
        now: float,
        dropped: Iterable[int] = (),
    ) -> None:
        """Give back the GPUs `row`'s job had replicas replaced on, and those of spares
        its supervisor `dropped` for a fault on them (while they are still unfit: one
        reset and given again as a new spare is the job's again), and refill its spares
        from free, healthy GPUs of its type, if it is short of them."""
        held = held_units(row)
        replaced = list(replaced)
        start = float(row["start_time"] or 0.0)
        looked = self.looked.get(row["job_id"])
        if looked is None or looked[0] != start:  # a first look at this run (or a restart)
            looked = (start, self._handled(row["job_id"], start, replaced))
        # Only what the replacements since the last look left: a fenced GPU may still run
        # one of its replicas (a drain lets jobs finish), a GPU given back is one the
        # ladder may reset, and one given back before may be a spare or a replica again.
        given_up = given_back(held, replaced[looked[1] :], dropped, self._fit)
        self.looked[row["job_id"]] = (start, len(replaced))
        keep = [g for g in held if g not in given_up]
        each = elastic.replica_gpus
        wanted = (elastic.replicas_of(int(row["cpus"])) + elastic.spares) * each
        short = max(0, wanted - len(keep)) // max(1, each) * each
        take: list[int] = []
        if short:
            take = self._free(held, self.running())[:short]
            take = take[: len(take) // max(1, each) * each]
        if keep == held and not take:
            return
        spares = [take[i : i + each] for i in range(0, len(take), each)]
        back = sorted(set(held) - set(keep))
        detail = f"gave back GPU {_ids(back) or '-'}; new spare GPU {_ids(take) or '-'}"
        if not self.store.swap_units(row["job_id"], [*keep, *take], detail, now):
            self.looked[row["job_id"]] = looked  # not done: the next look tries again
            return
        log.warning("job %s: %s", row["job_id"], detail)
        if spares:
            self.runs.add_spares(row["job_id"], spares)

    def _fit(self, gpu: int) -> bool:
        """Whether GPU `gpu` of this node is fit for work now (`fit_for_work`)."""
        found = (h for h in self.health.all(self.node.name) if h.gpu == gpu)
        return fit_for_work(next(found, None))

    def _free(self, held: list[int], running: list[Row]) -> list[int]:
        """Whole GPUs of the type of those `held` that no running job holds and that are
        fit for work (schedulable, not fenced), those that passed their last deep check
        first."""
        owners = gpu_owners(running)
        types = {g.index: g.type for g in self.node.gpus}
        kind = types.get(held[0]) if held else None
        table = {h.gpu: h for h in self.health.all(self.node.name)}
        free = []
        for gpu in self.node.gpus:
            h = table.get(gpu.index)
            if gpu.index in owners or not fit_for_work(h):
                continue
            if self.node.gpu_devices.get(gpu.index):  # a real device: see the module's note
                continue
            if kind is not None and gpu.type != kind:
                continue
            free.append((h is None or h.deep != "passed", gpu.index))
        return [index for _, index in sorted(free)]


def fit_for_work(h: Health | None) -> bool:
    """Whether a GPU of this health record is fit for work: schedulable, not fenced."""
    return h is None or (h.label is Label.SCHEDULABLE and not h.fenced)


def given_back(
    held: list[int],
    new: Iterable[dict[str, Any]],
    dropped: Iterable[int],
    fit: Callable[[int], bool],
) -> set[int]:
    """The GPUs a job gives back now: those its replacements `new` left behind
    (`left_behind`), and those of spares its supervisor `dropped` for a fault on them
    that it still holds and that are still unfit (one reset since and given to it again
    as a new spare is its own again)."""
    return left_behind(held, new) | {g for g in dropped if g in held and not fit(g)}


def left_behind(held: Iterable[int], new: Iterable[dict[str, Any]]) -> set[int]:
    """The GPUs the replacements `new` (in order, none looked at before) left behind that
    the job still holds: each one's `gpus_from`, less any a later one moved a replica
    onto (`gpus_to`)."""
    left: set[int] = set()
    for r in new:
        left |= {int(g) for g in r.get("gpus_from") or ()}
        left -= {int(g) for g in r.get("gpus_to") or ()}
    return left & set(held)


def _ids(gpus: Iterable[int]) -> str:
    return ",".join(str(g) for g in gpus)


__all__ = ["SpareRefill", "fit_for_work", "given_back", "left_behind"]
