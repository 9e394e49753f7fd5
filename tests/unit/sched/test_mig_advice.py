"""The MIG layout advisor: layouts searched per GPU, scored by what the queue gets."""

from __future__ import annotations

import math

from podium.api.mig import place
from podium.sched.mig_advice import WHOLE, GpuNow, Running, Waiting, advise, layouts

H100 = "h100-80gb"


def waiting(job_id: int, kind: str, count: int = 1, priority: float = 1.0) -> Waiting:
    return Waiting(job_id, kind, count, priority, submit_time=0.0)


def test_every_layout_places_and_none_is_listed_twice() -> None:
    found = layouts(H100)
    assert found[0] == WHOLE and len(set(found)) == len(found)
    for layout in found[1:]:
        place(H100, list(layout))  # raises when a layout breaks a rule
    assert ("1g.10gb",) * 7 in found and ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb") in found
    assert ("4g.40gb", "4g.40gb") not in found and ("3g.40gb", "3g.40gb", "1g.10gb") not in found


def test_seven_notebooks_split_an_idle_gpu_in_seven() -> None:
    advice = advise([GpuNow(0, H100, WHOLE)], [waiting(i, "1g.10gb") for i in range(7)], 100.0)
    (change,) = advice.changes
    assert change.advised == ("1g.10gb",) * 7 and change.admits == tuple(range(7))
    assert change.drain == () and change.ready_at == 100.0
    assert (advice.before.admitted, advice.after.admitted) == (0, 7)


def test_a_mixed_queue_gets_the_balanced_layout() -> None:
    queue = [
        waiting(1, "3g.40gb"),
        waiting(2, "2g.20gb"),
        waiting(3, "1g.10gb"),
        waiting(4, "1g.10gb"),
    ]
    (change,) = advise([GpuNow(0, H100, WHOLE)], queue, 0.0).changes
    assert sorted(change.advised) == sorted(("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
    assert sorted(change.admits) == [1, 2, 3, 4]


def test_the_idle_gpu_changes_rather_than_the_busy_one() -> None:
    busy = GpuNow(0, H100, WHOLE, (Running(50, "whole", 900.0),))
    idle = GpuNow(1, H100, WHOLE)
    advice = advise([busy, idle], [waiting(1, "1g.10gb"), waiting(2, "1g.10gb")], 100.0)
    changed = [c for c in advice.changes if c.changes]
    assert [c.gpu for c in changed] == [1] and advice.after.drains == 0
    assert sorted(changed[0].admits) == [1, 2]


def test_a_busy_gpu_that_must_change_comes_with_its_drain_plan() -> None:
    busy = GpuNow(0, H100, ("7g.80gb",), (Running(50, "7g.80gb", 900.0),))
    advice = advise([busy], [waiting(1, "1g.10gb", priority=5.0)], 100.0)
    (change,) = advice.changes
    assert change.changes and change.drain == (Running(50, "7g.80gb", 900.0),)
    assert change.ready_at == 900.0 and change.admits == (1,)
    unlimited = GpuNow(0, H100, ("7g.80gb",), (Running(51, "7g.80gb", math.inf),))
    assert advise([unlimited], [waiting(1, "1g.10gb")], 0.0).changes[0].ready_at == math.inf


def test_nothing_waiting_changes_nothing_and_whole_jobs_keep_gpus_whole() -> None:
    gpus = [GpuNow(0, H100, WHOLE), GpuNow(1, H100, ("3g.40gb", "3g.40gb"))]
    assert not any(c.changes for c in advise(gpus, [], 0.0).changes)
    advice = advise(gpus, [waiting(1, "whole", count=2)], 0.0)
    by_gpu = {c.gpu: c for c in advice.changes}
    assert by_gpu[0].advised == WHOLE and by_gpu[1].advised == WHOLE
    assert by_gpu[0].admits == (1,) and by_gpu[1].admits == (1,)


def test_higher_priority_wins_the_last_slice() -> None:
    queue = [waiting(1, "4g.40gb", priority=1.0), waiting(2, "7g.80gb", priority=9.0)]
    (change,) = advise([GpuNow(0, H100, WHOLE)], queue, 10.0).changes
    assert change.advised == ("7g.80gb",) and change.admits == (2,)


def test_a_profile_no_gpu_has_is_reported() -> None:
    advice = advise([GpuNow(0, H100, WHOLE)], [waiting(1, "1g.5gb")], 0.0)  # an A100 40GB's
    assert advice.unplaceable == (1,)
