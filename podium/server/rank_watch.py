"""What each running job's ranks said of their steps (podium.run.rank_beats), looked at
every health interval: their step seconds for `/metrics` (podium_rank_step_seconds) and
`podium show`, and a straggler named once it stays slow over a window
(podium.recover.stragglers), with a `straggler` event the first time."""

from __future__ import annotations

from collections.abc import Callable

from podium.recover.stragglers import Straggler, StragglerWatch
from podium.store.db import Store


class RankWatch:
    """The last look at every running job's ranks. Reads under the caller's lock."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self.watch = StragglerWatch()
        self.seconds: dict[int, dict[int, float]] = {}  # job -> rank -> step seconds
        self.stragglers: dict[int, Straggler] = {}

    def look(
        self,
        said: dict[int, dict[int, tuple[float, float]]],
        replaced: dict[int, int] | None = None,
    ) -> None:
        """One look: `said` is every running job's ranks' (step, step seconds) (empty
        for a job whose ranks say none); `replaced`, how many of each job's replicas were
        replaced so far (a replacement starts its straggler window afresh)."""
        replaced = replaced or {}
        self.watch.forget(set(said))
        self.seconds = {
            job: {rank: s for rank, (_, s) in ranks.items()} for job, ranks in said.items() if ranks
        }
        named: dict[int, Straggler] = {}
        for job_id, seconds in sorted(self.seconds.items()):
            steps = {rank: step for rank, (step, _) in said[job_id].items()}
            found = self.watch.look(job_id, self.clock(), seconds, steps, replaced.get(job_id, 0))
            if found is None:
                continue
            named[job_id] = found
            if job_id not in self.stragglers:  # named just now: once in its timeline
                self.store.event(self.clock(), "straggler", job_id=job_id, detail=found.words())
        self.stragglers = named

    def of(self, job_id: int) -> dict[str, object]:
        """`podium show`'s view: each rank's step seconds and the straggler, if any."""
        seconds = self.seconds.get(job_id)
        found = self.stragglers.get(job_id)
        return {
            "rank_step_seconds": {str(r): round(s, 4) for r, s in sorted(seconds.items())}
            if seconds
            else None,
            "straggler": found.words() if found is not None else None,
        }


__all__ = ["RankWatch"]
