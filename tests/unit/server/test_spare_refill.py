"""Which GPUs a job with spares gives back after its replacements (issue 63's refill
flapping and the live replica's GPU given back)."""

from __future__ import annotations

from podium.server.spare_refill import given_back, left_behind


def test_a_replacement_leaves_its_gpu_once() -> None:
    """Rank 1 on GPU 1 replaced by the spare on GPU 2: GPU 1 is given back at the
    look after the replacement, and at no later look (the refill may take it again as
    the new spare: it must not be given back every half second)."""
    r1 = {"gpus_from": [1], "gpus_to": [2]}
    assert left_behind([0, 1, 2], [r1]) == {1}
    assert left_behind([0, 2, 1], []) == set()  # GPU 1 taken again as a spare: kept


def test_a_gpu_a_later_replica_moved_onto_is_not_given_back() -> None:
    """The second replacement moves rank 1 from GPU 2 onto GPU 1 (given back after the
    first and given again as a spare): only GPU 2 is left, never GPU 1, where the live
    replica now runs; also when both replacements are looked at together (a restart)."""
    r1 = {"gpus_from": [1], "gpus_to": [2]}
    r2 = {"gpus_from": [2], "gpus_to": [1]}
    assert left_behind([0, 2, 1], [r2]) == {2}
    assert left_behind([0, 2, 1], [r1, r2]) == {2}
    assert left_behind([0, 1], [r2]) == set()  # GPU 2 no longer held: nothing to give


def test_a_spare_dropped_for_a_fault_on_its_gpu_is_given_back_while_unfit() -> None:
    """An Xid on the spare's own GPU 2 (no rank ran there): the supervisor dropped the
    spare, so the job gives GPU 2 back and the refill gives it a new spare; it kept it,
    fenced and spare-less, until it ended. Reset and given again as a new spare, GPU 2
    is the job's own again: not given back."""
    unfit = {2}
    assert given_back([0, 1, 2], [], [2], lambda g: g not in unfit) == {2}
    assert given_back([0, 1, 3], [], [2], lambda g: g not in unfit) == set()  # gone already
    unfit.clear()  # reset: fit again, and the refill gave it back to the job
    assert given_back([0, 1, 2], [], [2], lambda g: g not in unfit) == set()
