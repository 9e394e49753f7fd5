"""The output of every read-only command the Slurm clients ran (the golden lists of
tests/integration/test_slurm_clients.py), for fixed records, as the clients parse it:
a change to what sacct, squeue, sinfo or `scontrol show config` prints for them is
seen here, without the clients. PODIUM_UPDATE_GOLDEN=1 rewrites the expected text
(review the diff against what the client's parser reads)."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

from podium.slurm_commands.sacct import sacct
from podium.slurm_commands.show_config import show_config
from podium.slurm_commands.sinfo import sinfo
from podium.slurm_commands.squeue import squeue

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "integration" / "golden" / "slurm_clients"
EXPECTED = Path(__file__).parent / "golden" / "client_outputs.txt"
RUN = "0b7c7a8e-3a5e-4f7e-9a55-5a1e0c2f3d41"  # a Snakemake run id: the jobs' name


def record(job_id: int, state: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job_id, "display_id": str(job_id), "array_job_id": None,
        "array_task_id": None, "array_task_string": None, "name": RUN, "user": "alice",
        "uid": 1000, "account": "lab", "partition": "main", "qos": "normal", "nice": 0,
        "state": state, "ending": None, "reason": "None", "cpus": 2, "gpus": 0,
        "gpu_type": None, "mem_mb": 1000, "ntasks": 1, "node": "node0", "node_count": 1,
        "time_limit_s": 300, "exit_code": 0, "signal": None, "elapsed_s": 5.0,
        "submit_time": "2026-11-23T08:00:00+00:00", "start_time": "2026-11-23T08:00:01+00:00",
        "end_time": "2026-11-23T08:00:06+00:00", "submit_epoch": 1795420800.0,
        "start_epoch": 1795420801.0, "end_epoch": 1795420806.0, "restart_count": 0,
        "work_dir": "/w", "comment": None, "wckey": None, "stdout": None, "stderr": None,
        "dependency": None, "held": False,
    }  # fmt: skip
    steps = [
        {"step_id": "batch", "display_id": f"{job_id}.batch", "name": "batch", "state": state,
         "exit_code": base["exit_code"], "signal": None, "elapsed_s": 5.0,
         "start_time": base["start_time"], "end_time": base["end_time"], "ntasks": 1,
         "node": "node0", "gpu_ids": []},
        {"step_id": "0", "display_id": f"{job_id}.0", "name": "python3", "state": state,
         "exit_code": base["exit_code"], "signal": None, "elapsed_s": 4.0,
         "start_time": base["start_time"], "end_time": base["end_time"], "ntasks": 2,
         "node": "node0", "gpu_ids": []},
    ]  # fmt: skip
    return base | {"steps": steps} | kw


RECORDS = [
    record(12, "COMPLETED"),
    record(13, "FAILED", exit_code=3, reason="NonZeroExitCode"),
    record(14, "COMPLETING", ending="CANCELLED", end_time=None, end_epoch=None),
    record(15, "RUNNING", end_time=None, end_epoch=None),
    record(16, "PENDING", display_id="16_[0-3%2]", array_job_id=16,
           array_task_string="0-3%2", start_time=None, end_time=None, node=None,
           start_epoch=None, end_epoch=None, steps=[], reason="Resources"),
]  # fmt: skip
NODES = [
    {"node": "node0", "state": "mixed", "partitions": ["main"], "cpus_total": 16,
     "cpus_alloc": 4, "mem_total_mb": 16000, "mem_alloc_mb": 2000, "gpus_total": 4,
     "gpu_type": "h100", "gpus_used": 0, "features": [], "reason": None},
]  # fmt: skip
PING = {"cluster_name": "podium", "kill_wait_s": 30.0, "max_array_size": 1001, "node": "node0"}
FILL = {"<id>": "12", "<step>": "0", "<date>": "2026-11-23T00:00", "<uuid>": RUN, "<dir>": "/w"}


def run(line: str) -> str | None:
    """The output of one golden command, or None for one that is not read-only."""
    words = line.replace("-j <id> ...", "-j <id> -j 13").split()  # a run of -j: two
    for mark, value in FILL.items():
        words = [w.replace(mark, value) for w in words]
    tool, args = words[0], words[1:]
    out = io.StringIO()
    try:
        if tool == "sacct":
            return sacct(args, lambda: [dict(r) for r in RECORDS])
        if tool == "sinfo":
            return sinfo(args, lambda: NODES)
        if tool == "squeue":
            with contextlib.redirect_stdout(out):
                squeue(args, lambda every, keys: [dict(r) for r in RECORDS])
            return out.getvalue().rstrip("\n")
        if words == ["scontrol", "show", "config"]:
            text = show_config(PING)
            return "\n".join(["Configuration data as of <date>", *text.splitlines()[1:]])
    except ValueError as exc:
        return f"error: {exc}"
    return None


def test_what_the_clients_read_is_unchanged() -> None:
    lines = sorted({line for p in GOLDEN.glob("*.txt") for line in p.read_text().splitlines()})
    assert lines, f"no golden lists under {GOLDEN}"
    text = ""
    for line in lines:
        output = run(line)
        if output is not None:
            text += f"$ {line}\n{output}\n\n"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        EXPECTED.parent.mkdir(parents=True, exist_ok=True)
        EXPECTED.write_text(text)
    assert text == EXPECTED.read_text()
    assert "error:" not in text.replace("error: option -1", "")  # sacct -nu ... | tail -1
