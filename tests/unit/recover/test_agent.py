"""The health agent's bookkeeping over a real store: faults counted once per episode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podium.config.cluster import ClusterConfig
from podium.node.health.check_results import Action, Result, Status
from podium.node.inventory import GpuInfo
from podium.recover.agent import HealthAgent
from podium.recover.ladder import Label
from podium.store.db import Store
from podium.store.health_table import HealthTable

DISK = Result("disk", Status.CRITICAL, "/ is 95% full", Action.DRAIN)


class NoJobs:
    def gpu_jobs(self) -> dict[int, list[int]]:
        return {}

    def running_job_ids(self) -> list[int]:
        return []

    def fail_jobs(self, job_ids: list[int], reason: str, gpu: int | None) -> None:
        raise AssertionError("no job runs here")


def make_agent(tmp_path: Path, **kw: Any) -> tuple[HealthAgent, HealthTable]:
    """An agent for node n0 with one declared GPU over a real store, at time 100."""
    store = Store(tmp_path / "db")
    store.ensure_node("n0")
    table = HealthTable(store)
    config = ClusterConfig.model_validate(
        {"node": {"name": "n0"}, "health": {"kernel_log": str(tmp_path / "kern.log")}}
    )
    gpus = [GpuInfo(0, "h100", 81920, "declared-0")]
    agent = HealthAgent(tmp_path, config, "n0", gpus, table, NoJobs(), clock=lambda: 100.0, **kw)
    return agent, table


def test_a_lasting_condition_is_one_fault_not_a_repeat_offender(tmp_path: Path) -> None:
    agent, table = make_agent(tmp_path)
    for now in (100.0, 100.2, 100.4, 100.6):  # quick checks keep finding the full disk
        agent.handle([DISK], now)
    h = table.get("n0", None)
    assert h.fenced and h.label is not Label.PENDING_REPLACEMENT, h
    assert table.recent_faults("n0", None, 0.0) == 1
    agent.handle([DISK], 101.0, skip={None})  # a failed retest counts
    assert table.recent_faults("n0", None, 0.0) == 2
    agent.close()


def test_a_failed_mig_apply_leaves_the_gpu_fenced_for_an_admin(tmp_path: Path) -> None:
    from podium.api.health import MIG_APPLY_FAILED, Health, Remedy

    asked: list[int] = []

    def refuse(gpu: int) -> str:
        asked.append(gpu)
        raise RuntimeError("nvidia-smi -i 0 -mig 1 exited 1:\nIn use by another client")

    agent, table = make_agent(tmp_path, mig_apply=refuse)
    pending = Health("n0", 0, Label.PENDING_MIG_APPLY, True, "mig-apply", "asked", Remedy.MIG_APPLY)
    table.put(pending, 99.0)
    for _ in range(3):
        agent.tick()
    h = table.get("n0", 0)
    assert asked == [0]  # tried once, never again by itself
    assert h.fenced and h.fault == MIG_APPLY_FAILED and h.label is Label.PENDING_MIG_APPLY
    assert h.reason == (
        "mig apply failed: nvidia-smi -i 0 -mig 1 exited 1: In use by another client: "
        "resume the GPU (podium resume --gpu 0) or apply a layout again"
    )
    agent.close()
