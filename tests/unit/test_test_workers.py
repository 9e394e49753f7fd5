"""The parallel workers' port ranges (tests/workers.py) never meet."""

from __future__ import annotations

import pytest

from podium.backends.slurm import slurm_conf
from tests import workers

# The modules' nominal bases (slurm_cluster.start_cluster callers and k8s_cluster's) and
# the most ports above its base any cluster binds (a Slurm one-host layout's slurmds at
# base + 200 + node).
NOMINAL = [18800, 19000, 19100, 19200, 19300, 19400, 19500, 19600]
SPAN = 220


def _ranges(monkeypatch: pytest.MonkeyPatch, worker: int) -> list[int]:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
    return [workers.port_base(n) for n in NOMINAL]


def test_no_two_workers_share_a_port_or_a_subnet(monkeypatch: pytest.MonkeyPatch) -> None:
    bases = {w: _ranges(monkeypatch, w) for w in range(workers.MAX_WORKERS)}
    for w, mine in bases.items():
        low, high = min(mine), max(mine) + SPAN
        assert low > 1024 and high < 20_000  # below Slurm jobs' MASTER_PORTs
        for other, theirs in bases.items():
            if other != w:
                assert all(not (low <= b <= high) for b in theirs), (w, other)
    subnets = [slurm_conf.Testbed("/x", "h", b).subnet() for mine in bases.values() for b in mine]
    assert len(subnets) == len(set(subnets))


def test_a_worker_past_the_last_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{workers.MAX_WORKERS}")
    with pytest.raises(AssertionError, match="at most"):
        workers.port_base(18800)
