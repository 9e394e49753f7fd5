"""GPU memory per job from NVML's per-process memory, through the recorded seam."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from podium.node.gpu_memory import accounted_memory, by_job, process_memory
from podium.node.nvml_replay import RecordedNvml
from podium.store.db import Store


def test_memory_is_summed_per_process_over_gpus_then_per_job() -> None:
    me = os.getpid()
    nvml = RecordedNvml(
        {"gpus": [{"processes": [[me, 1000], [1, None]]}, {"processes": [[me, 24]]}]}
    )
    assert process_memory(nvml) == {me: 1024}  # a hidden process's memory is not counted
    gone = subprocess.Popen(["true"])
    gone.wait()
    # a process in a session of its own, as another user's program would be (pid 1 may
    # share the test's session inside a container, so it cannot stand in for one)
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        used = {me: 1024, gone.pid: 5, other.pid: 7}
        assert by_job(used, {os.getsid(me): 42}) == {42: 1024}
        assert by_job(used, {other.pid: 9}) == {9: 7}
    finally:
        other.kill()
        other.wait()


def test_the_store_keeps_the_high_water_mark(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    with store.transaction() as db:
        db.execute(
            "INSERT INTO jobs (job_id, name, user, uid, gid, account, partition, qos, state, "
            "submit_time, spec, work_dir) "
            "VALUES (7, 'j', 'u', 0, 0, 'a', 'p', 'q', 'RUNNING', 0, '', '/')"
        )
    for mib in (300, 900, 400):
        store.raise_gpu_memory({7: mib})
    assert store.job(7)["gpu_mem_peak_mb"] == 900


def test_accounting_keeps_what_ended_processes_held_in_the_jobs_window() -> None:
    """Issue 46: a job shorter than the sampling interval had no figure; NVML's
    accounting keeps each process's high-water mark after it ends."""
    t = 1_800_000_000.0
    nvml = RecordedNvml({"gpus": [
        {"accounting": {"mode": 1, "processes": [[10, t + 1, 3000], [11, t - 600, 9000]]}},
        {"accounting": {"mode": 1, "processes": [[12, t + 2, 500]]}},
        {"accounting": {"mode": 0, "processes": [[13, t + 1, 700]]}},
    ]})  # fmt: skip
    assert accounted_memory([0, 1], t, t + 5, nvml) == 3500  # pid 11 ran before the job
    assert accounted_memory([0], t + 10, t + 20, nvml) == 0
    assert accounted_memory([2], t, t + 5, nvml) is None  # accounting mode off: unknown
    assert accounted_memory([0, 2], t, t + 5, nvml) is None
