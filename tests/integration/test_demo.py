"""The main job: the seed scenario on the embedded cluster, with real PyTorch training."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import BIN, PODIUM

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="PyTorch is not installed (pip install '.[torch]')",
    ),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _replay(tmp_path: Path, count: int | None) -> dict[str, str]:
    """The environment for a demo on this machine (None) or on `count` recorded H100s."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    if count is not None:
        from tests.integration.test_health import recording

        env["PODIUM_NVML_REPLAY"] = str(recording(tmp_path, count))
    return env


def _machine_gpus(count: int | None) -> int:
    if count is not None:
        return count
    from podium.node.inventory import read_nvml

    return len(read_nvml() or [])


@pytest.mark.parametrize("gpus", [None, 1, 2], ids=["this-machine", "1-gpu", "2-gpus"])
def test_demo_runs_the_seed_scenario(tmp_path: Path, gpus: int | None) -> None:
    """On this machine as a new user runs it (no --home: a temporary directory of its
    own, removed after the run); else with --home, kept for the checks below. With 2
    GPUs the researchers submit C, A, B (issue 62): the queue still goes by QoS."""
    home = tmp_path / "home"
    as_new_user = gpus is None
    env = dict(_replay(tmp_path, gpus), TMPDIR=str(tmp_path))
    order = ["--order", "CAB"] if gpus == 2 else []
    result = subprocess.run(
        [PODIUM, "demo"] if as_new_user else [PODIUM, "demo", "--home", str(home), *order],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    real = _machine_gpus(gpus)
    story = {0: "B and A shared the four GPUs", 1: "A and B took turns"}.get(
        real, f"B and A shared the {real} GPUs"
    )
    assert f"{story}; C waited for a free GPU" in out, out
    # At some point A (or B) was running while C was pending for Resources.
    tables = out.split("queue at")
    assert any(
        re.search(r"(bert|gpt) .* RUNNING", t)
        and re.search(r"resnet .* PENDING .*\(Resources\)", t)
        for t in tables
    ), out
    if real != 1:  # A and B together
        assert any(
            re.search(r"bert .* RUNNING", t) and re.search(r"gpt .* RUNNING", t) for t in tables
        ), out
    assert "accounting" in out and out.count("COMPLETED") >= 3
    for model, steps in (("bert", 60), ("gpt", 100), ("resnet", 20)):
        assert re.search(rf"\] done: {steps} steps", out), model
        assert as_new_user or list(home.glob(f"checkpoints/*/{model}-dcp/latest")), model
    assert not (home / "podium.sock").exists()  # the demo stopped its daemon
    if as_new_user:  # nothing of the demo is left behind (issue 26, item 17)
        assert not list(tmp_path.glob("podium-demo-*")), list(tmp_path.iterdir())


@pytest.mark.parametrize("gpus", [None, 2], ids=["this-machine", "2-gpus"])
def test_fault_demo_resumes_on_healthy_gpus_from_the_last_checkpoint(
    tmp_path: Path, gpus: int | None
) -> None:
    home = tmp_path / "home"
    env = _replay(tmp_path, gpus)
    result = subprocess.run(
        [PODIUM, "demo", "--faults", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    bad = int(re.search(r"Xid 79 \(GPU has fallen off the bus\) written for GPU (\d)", out)[1])  # type: ignore[index]
    assert re.search(rf"node0\s+{bad}\s+\S+\s+-\s+unschedulable-pending-reboot\s+xid-79", out), out
    steps = re.search(r"last checkpoint at step (\d+);.* it resumed at step (\d+)", out)
    assert steps and steps[1] == steps[2], out
    assert "requeue  NODE_FAIL: health: Xid 79 on GPU" in out
    assert "+-" not in out  # times before the fault are signed as such (item 19)
    took = re.search(r"fault to requeue: ([0-9.]+)s", out)
    assert took and float(took[1]) < 5, out  # health.interval_s is 30 s: Xids are followed
    assert "ended COMPLETED after 1 restart(s)" in out
    progress = [line for line in (home / "work" / "progress.jsonl").read_text().splitlines()]
    assert '"restart": 1' in progress[-1]


def test_training_job_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    env = dict(os.environ, PODIUM_CHECKPOINT_DIR=str(tmp_path), RANK="0", WORLD_SIZE="1")
    cmd = [
        sys.executable,
        str(EXAMPLES / "train.py"),
        "--model",
        "resnet",
        "--checkpoint-every",
        "5",
    ]
    first = subprocess.run(
        [*cmd, "--steps", "10"], capture_output=True, text=True, env=env, timeout=300
    )
    assert first.returncode == 0, first.stderr
    assert "done: 10 steps" in first.stdout
    second = subprocess.run(
        [*cmd, "--steps", "15"], capture_output=True, text=True, env=env, timeout=300
    )
    assert second.returncode == 0, second.stderr
    assert "resumed from checkpoint at step 10" in second.stdout
    assert "done: 15 steps" in second.stdout


def test_the_demo_s_jobs_show_on_the_web_page_as_they_run(tmp_path: Path) -> None:
    """README: `podium demo --http 127.0.0.1:PORT` prints a read-only token; with it,
    the page's API shows the demo's jobs on their GPUs while they run."""
    import httpx

    from tests.integration.test_http_api import _free_port

    port = _free_port()
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", TMPDIR=str(tmp_path))
    demo = subprocess.Popen(
        [PODIUM, "demo", "--http", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert demo.stdout is not None
    out: list[str] = []
    try:
        for line in demo.stdout:
            out.append(line)
            if line.startswith("  pdm_"):
                break
        assert f"Watch it at http://127.0.0.1:{port}/" in "".join(out), out
        bearer = {"Authorization": f"Bearer {out[-1].strip()}"}
        seen: set[str] = set()
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=bearer) as page:
            assert page.get("/").status_code == 200
            while len(seen) < 2 and demo.poll() is None:
                node = page.get("/v1/nodes").json()["nodes"][0]
                names = {j["job_id"]: j["name"] for j in page.get("/v1/jobs").json()["jobs"]}
                seen |= {names[g["job_id"]] for g in node["gpus"] if g["job_id"] in names}
            assert page.post("/v1/jobs/cancel", json={"job_ids": [1]}).status_code == 403
        assert {"bert", "gpt"} <= seen, seen  # A's and B's jobs on their GPUs
        rest = demo.communicate(timeout=600)[0]
        assert demo.returncode == 0, "".join(out) + rest
    finally:
        if demo.poll() is None:  # a failed check: stop the demo and the daemon it started
            demo.kill()
            demo.wait()
            from podium.cli.daemon_cmds import stop_daemon

            for home in tmp_path.glob("podium-demo-*"):
                stop_daemon(home)
