"""A real Prometheus server (Debian's package) scrapes the daemon's /metrics on
loopback; the test asks Prometheus' own HTTP API and finds the cluster's state there:
jobs by state, the GPUs a job holds, a node's allocation, a pass's length, and an Xid
on one GPU under dcgm-exporter's name."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_http_api import _free_port
from tests.polling import poll

pytestmark = pytest.mark.integration
PROMETHEUS = shutil.which("prometheus")


@pytest.fixture(scope="module")
def scraped() -> Iterator[tuple[Cluster, str]]:
    if PROMETHEUS is None:
        pytest.skip("prometheus is not installed (apt-get install prometheus; .ci/run does)")
    port, web = _free_port(), _free_port()
    c = make_cluster(gpus=4, cpus=8, extra=f"http: {{listen: '127.0.0.1:{port}'}}\n")
    c.start()
    data = Path(tempfile.mkdtemp(prefix="podium-prom-"))
    (data / "prometheus.yml").write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: podium\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{port}']}}]\n"
    )
    with open(data / "prometheus.log", "wb") as log:
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={data / 'prometheus.yml'}",
             f"--storage.tsdb.path={data / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}"],
            stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{web}"
        try:
            poll(lambda: httpx.get(f"{url}/-/ready", timeout=2).status_code, lambda s: s == 200,
                 "Prometheus to be ready", 60, retry_on=(httpx.HTTPError,))  # fmt: skip
        except (AssertionError, httpx.HTTPError):
            raise AssertionError((data / "prometheus.log").read_text()[-2000:]) from None
        yield c, url
    finally:
        prom.terminate()  # the one process this test started, by its handle
        prom.wait(timeout=30)
        teardown_cluster(c)
        shutil.rmtree(data, ignore_errors=True)


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _until(url: str, expr: str, test: Any, timeout: float = 30) -> list[dict[str, Any]]:
    return poll(lambda: _query(url, expr), test, expr, timeout)


def _value(result: list[dict[str, Any]]) -> float:
    return float(result[0]["value"][1]) if result else float("nan")


def test_prometheus_sees_what_the_cluster_is_doing(scraped: tuple[Cluster, str]) -> None:
    c, url = scraped
    assert _value(_until(url, 'up{job="podium"}', lambda r: _value(r) == 1)) == 1
    running = c.submit("--gpus=3", "--wrap", "sleep 300")
    c.wait(running, {"RUNNING"})
    waiting = c.submit("--gpus=2", "--wrap", "sleep 300")
    _until(url, "slurm_jobs_running", lambda r: _value(r) == 1)
    _until(url, "slurm_jobs_pending", lambda r: _value(r) == 1)
    held = _until(url, f'podium_gpu_job{{job_id="{running}"}}', lambda r: len(r) == 3)
    assert {r["metric"]["user"] for r in held} == {"root"}
    gpus = {r["metric"]["gpu"] for r in held}
    assert _value(_query(url, "slurm_node_gpus_alloc")) == 3
    assert _value(_query(url, 'podium_jobs_pending_reason{reason="Resources"}')) == 1
    assert _value(_query(url, "slurm_schedule_cycle_cnt")) >= 1
    _until(url, "podium_job_wait_seconds_count", lambda r: _value(r) >= 1)
    c.cli("progress", "1", "--of", "4", "--job", str(running), check=True)  # what it says
    said = f'podium_job_progress_ratio{{job_id="{running}"}}'
    assert _value(_until(url, said, lambda r: _value(r) == 0.25)) == 0.25
    free = next(str(g) for g in range(4) if str(g) not in gpus)
    c.cli("inject", "xid", "--gpu", free, "--code", "79", check=True)
    _until(url, f'DCGM_FI_DEV_XID_ERRORS{{gpu="{free}"}}', lambda r: _value(r) == 79)
    fenced = _query(url, f'podium_gpu_health{{gpu="{free}"}}')
    assert fenced and fenced[0]["metric"]["state"] != "schedulable", fenced
    # declared GPUs: no NVML behind them, so no utilisation is made up
    assert _query(url, "DCGM_FI_DEV_GPU_UTIL") == []
    for job_id in (running, waiting):
        c.cli("cancel", str(job_id), check=True)
    _until(url, "slurm_jobs_cancelled", lambda r: _value(r) == 2)
    node = json.loads(c.cli("nodes", "--json", check=True).stdout)[0]["node"]
    c.cli("resume", node, "--gpu", free, check=True)


def test_the_grafana_dashboard_asks_prometheus_what_it_can_answer(
    scraped: tuple[Cluster, str],
) -> None:
    """Every query of docs/grafana/podium.json is PromQL Prometheus takes, and every
    metric it names is one the daemon exports (GPU telemetry aside: none on declared
    GPUs)."""
    _, url = scraped
    board = json.loads((Path(__file__).parents[2] / "docs/grafana/podium.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    _until(url, 'up{job="podium"}', lambda r: _value(r) == 1)
    exported = httpx.get(f"{url}/api/v1/label/__name__/values", timeout=10).json()["data"]
    for expr in exprs:
        answer = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert answer["status"] == "success", (expr, answer)
        for name in re.findall(r"\b((?:slurm|podium|DCGM)_[A-Za-z0-9_]+)", expr):
            base = re.sub(r"_(bucket|count|sum)$", "", name)
            if base.startswith("DCGM_FI_DEV_") and base != "DCGM_FI_DEV_XID_ERRORS":
                continue  # NVML telemetry: left out on declared GPUs
            assert any(e == name or e.startswith(base) for e in exported), (expr, name)
