"""The web dashboard in a real headless Chromium (Debian's chromium and chromedriver,
driven by Selenium): a login refused with a bad token, then the GPU grid with a job on
its GPUs, a pending job's reason and blockers, a hostile job name shown as text, a GPU
fenced by an Xid showing up live with its reason and in the health events, a job's page
with its timeline and the end of its output, and a second user's login that may see
neither root's job nor its output."""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_http_api import _free_port, _token
from tests.integration.test_permissions import other_user
from tests.polling import poll

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, used here by name
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def dashboard() -> Iterator[tuple[Cluster, str]]:
    if CHROMIUM is None or DRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    pytest.importorskip("selenium")
    port = _free_port()
    c = make_cluster(
        gpus=4, cpus=8, extra=f"http: {{listen: '127.0.0.1:{port}'}}\nhealth: {{interval_s: 0.5}}\n"
    )
    c.start()
    yield c, f"http://127.0.0.1:{port}"
    teardown_cluster(c)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(arg)  # fmt: skip
    driver = webdriver.Chrome(options=options, service=Service(str(DRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


def _until(test: Any, timeout: float = 20) -> Any:
    """`test()`'s value once true (a page not there yet may raise: retried)."""
    return poll(test, bool, "the page never showed it", timeout, retry_on=(Exception,))


def _text(browser: Any, selector: str) -> str:
    """The text of the element at `selector` now (the page rebuilds itself every 2 s,
    so an element is looked up again each time)."""
    from selenium.webdriver.common.by import By

    return str(browser.find_element(By.CSS_SELECTOR, selector).text)


def _login(browser: Any, url: str, token: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url + "/")
    _until(lambda: browser.current_url.endswith("/login"))
    field = browser.find_element(By.ID, "token")
    field.send_keys(token)
    field.submit()


def _shot(browser: Any, tmp_path: Path, name: str) -> None:
    browser.save_screenshot(str(tmp_path / name))
    where = os.environ.get("PODIUM_SCREENSHOTS")  # docs/img when making the README's
    if where:
        shutil.copy(tmp_path / name, Path(where) / name)


def test_what_a_person_sees(dashboard: tuple[Cluster, str], browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    c, url = dashboard
    _login(browser, url, "pdm_000000000000_" + "A" * 43)
    assert "not valid" in _until(lambda: browser.find_element(By.CLASS_NAME, "error").text)
    running = c.submit(
        "--gpus=2", "-J", "train-<b>bold</b>", "--wrap", "echo step-1-of-train; sleep 300"
    )
    c.wait(running, {"RUNNING"})
    waiting = c.submit("--gpus=4", "-t", "1:00", "-J", "big", "--wrap", "sleep 300")
    _login(browser, url, _token(c, "--read-only"))
    gpus = c.job(running)["gpu_ids"]
    cell = f'[data-gpu$="/{gpus[0]}"]'
    _until(lambda: f"job {running} root" in _text(browser, cell))
    row = f'tr[data-job="{waiting}"]'
    _until(lambda: "Resources" in _text(browser, row) and "big" in _text(browser, row))
    # its blockers in plain words: the job holding GPUs, with no time limit
    _until(lambda: f"job {running} (root, no time limit)" in _text(browser, f"{row} .blockers"))
    assert "util -" in _text(browser, cell)  # declared GPUs: NVML gives no utilisation
    named = f'tr[data-job="{running}"]'
    assert "train-<b>bold</b>" in _text(browser, named)  # shown as text, never as markup
    assert not browser.find_elements(By.CSS_SELECTOR, f"{named} b")
    _shot(browser, tmp_path, "dashboard.png")
    free = next(g for g in range(4) if g not in gpus)
    c.cli("inject", "xid", "--gpu", str(free), "--code", "79", check=True)
    fenced = f'[data-gpu$="/{free}"]'
    _until(lambda: "fenced" in browser.find_element(By.CSS_SELECTOR, fenced).get_attribute("class"))
    assert "79" in _text(browser, fenced) or "xid" in _text(browser, fenced).lower()
    _until(lambda: "79" in _text(browser, "#health"))  # the health events, newest first
    _shot(browser, tmp_path, "dashboard-fenced.png")
    c.cli("progress", "1", "--of", "4", "--job", str(running), check=True)  # how far it is
    browser.get(f"{url}/jobs/{running}")
    _until(lambda: "start" in _text(browser, "#job table + h2 + table"))
    assert "25 % (1 of 4), its end is estimated from its next report" in _text(browser, "#job")
    assert "submit" in _text(browser, "#job table + h2 + table")
    assert "goodput" in _text(browser, "#job")
    _until(lambda: "step-1-of-train" in _text(browser, "#job pre.log"))  # read as the user
    _shot(browser, tmp_path, "dashboard-job.png")
    for job_id in (running, waiting):
        c.cli("cancel", str(job_id), check=True)
    node = c.cli("nodes", "--json", check=True).stdout.split('"node": "')[1].split('"')[0]
    c.cli("resume", node, "--gpu", str(free), check=True)


def test_a_second_user_sees_the_grid_but_not_roots_job(
    dashboard: tuple[Cluster, str], browser: Any, other_user: str
) -> None:
    from selenium.webdriver.common.by import By

    c, url = dashboard
    mine = c.submit("--gpus=1", "--wrap", "sleep 300")
    c.wait(mine, {"RUNNING"})
    _login(browser, url, _token(c, "--read-only", user=other_user))
    _until(lambda: browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{mine}"]'))
    browser.get(f"{url}/jobs/{mine}")
    _until(lambda: "belongs to root" in _text(browser, "#job .error"))
    token = _token(c, "--read-only", user=other_user)
    bearer = {"Authorization": f"Bearer {token}"}  # the log route refuses too, in one line
    refused = httpx.get(f"{url}/v1/jobs/{mine}/log", headers=bearer, timeout=10)
    assert refused.status_code == 403 and "belongs to root" in refused.json()["error"]
    c.cli("cancel", str(mine), check=True)


def test_finished_jobs_checkpoints_and_plain_words(
    dashboard: tuple[Cluster, str], browser: Any
) -> None:
    """Issue 44, item 7: finished jobs vanished from the main page, a job's page showed
    `lost GPU-seconds {}` and ISO times beside the browser's, and its timeline listed no
    checkpoints of a job that saved every few steps."""
    c, url = dashboard
    saves = (
        'for i in 1 2 3; do sleep 1.2; date > "$PODIUM_CHECKPOINT_DIR/step-$i.pt"; done; '
        "echo trained"
    )
    job = c.submit("-J", "saves-often", "--wrap", saves)
    c.wait(job)
    _login(browser, url, _token(c, "--read-only"))
    row = f'tr[data-ended="{job}"]'
    _until(lambda: "saves-often" in _text(browser, row) and "COMPLETED" in _text(browser, row))
    browser.get(f"{url}/jobs/{job}")
    _until(lambda: "timeline" in _text(browser, "#job"))
    page = _text(browser, "#job")
    assert "lost GPU-seconds none" in page and "{}" not in page
    facts = _text(browser, "#job table")
    assert "ended" in facts and not re.search(r"\d{4}-\d\d-\d\dT\d", facts)  # no ISO times
    timeline = _text(browser, "#job table + h2 + table")
    assert timeline.count("checkpoint") >= 2, timeline


def test_a_straggler_is_named_on_its_jobs_page(
    dashboard: tuple[Cluster, str], browser: Any
) -> None:
    """Issue 48, item 4: the rank whose steps stay slow is named on the dashboard, as
    in `podium show` and /metrics: the job's facts say who, its ranks' table marks it."""
    pytest.importorskip("torch")
    c, url = dashboard
    train = Path(__file__).resolve().parents[2] / "examples" / "train.py"
    job = c.submit(
        "--elastic=2:2", "--gpus-per-task=1", "--heartbeat-timeout=60",
        f"--checkpoint-dir={c.work / 'ckpt-slow'}",
        "-o", "slow-%j.out", "--wrap", f"exec {sys.executable} {train} --model gpt "
        "--steps 400 --step-time 0.05 --report-every 0 --straggle 1:0.15", cwd=c.work,
    )  # fmt: skip
    try:
        poll(lambda: c.job(job), lambda j: j.get("straggler"), "a straggler named", 90)
        _login(browser, url, _token(c, "--read-only"))
        browser.get(f"{url}/jobs/{job}")
        _until(lambda: "rank 1:" in _text(browser, "#job table"), 30)
        _until(lambda: _text(browser, "#job table.ranks tr.straggler td") == "1", 30)
        assert "step seconds" in _text(browser, "#job table.ranks").lower()
    finally:
        c.cli("cancel", str(job), check=True)
        c.wait(job)
