"""Issue 43's attacks by a second Unix user through tokens and its own jobs, replayed
on the real daemon: a short-lived token minting one that outlives it, minting without
end, listing while minting, progress reports that broke every user's forecast, and a
loop on `podium show` that held the daemon's lock for seconds a call."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_http_api import _free_port, _token
from tests.integration.test_permissions import _as, other_user
from tests.polling import wait_until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, used here by name


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    port = _free_port()
    c = make_cluster(
        gpus=2, cpus=4, extra=f"http: {{listen: '127.0.0.1:{port}', max_tokens_per_user: 6}}\n"
    )
    c.start()
    c.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield c
    teardown_cluster(c)


def _http(c: Cluster, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=str(c.url),  # type: ignore[attr-defined]
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )


def _revoke_all(c: Cluster) -> None:
    with c.api() as api:
        for t in api.get("/v1/tokens").json()["tokens"]:  # expired ones too: they count
            api.delete(f"/v1/tokens/{t['token_id']}")  # (a 404 for one gone with its parent)


def test_a_token_made_with_a_token_dies_with_it(cluster: Cluster, other_user: str) -> None:
    c = cluster
    short = _token(c, "--expires", "3s", user=other_user)
    with _http(c, short) as them:
        child = them.post("/v1/tokens", json={})  # no expiry asked: the parent's
        assert child.status_code == 200, child.text
        made = child.json()
        assert made["user"] == other_user and made["parent"] == short.split("_")[1]
        longer = them.post("/v1/tokens", json={"expires_s": 3600})
        assert longer.status_code == 400 and "expires no later" in longer.json()["error"]
    with _http(c, made["token"]) as kid:
        assert kid.get("/v1/ping").json()["you"] == other_user
        wait_until(lambda: kid.get("/v1/ping").status_code == 401, "gone with its parent", 10)
    lasting = _token(c, user=other_user)
    with _http(c, lasting) as them:
        kid_token = them.post("/v1/tokens", json={}).json()["token"]
        grandkid = httpx.post(
            f"{c.url}/v1/tokens", json={"expires_s": 600},  # type: ignore[attr-defined]
            headers={"Authorization": f"Bearer {kid_token}"},
        ).json()["token"]  # fmt: skip
        revoked = _as(c, other_user, "token", "revoke", lasting.split("_")[1])
        assert revoked.returncode == 0, revoked.stderr
        for token in (lasting, kid_token, grandkid):
            answer = httpx.get(
                f"{c.url}/v1/ping",
                headers={"Authorization": f"Bearer {token}"},  # type: ignore[attr-defined]
            )
            assert answer.status_code == 401
    _revoke_all(c)


def test_a_user_holds_a_bounded_number_of_tokens(cluster: Cluster, other_user: str) -> None:
    c = cluster
    made = [_token(c, user=other_user) for _ in range(6)]
    refused = _as(c, other_user, "token", "create")
    assert refused.returncode != 0 and "holds 6 tokens" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    with _http(c, made[0]) as them:  # over HTTP too
        answer = them.post("/v1/tokens", json={})
        assert answer.status_code == 403 and "max_tokens_per_user" in answer.json()["error"]
    _revoke_all(c)


def test_listing_tokens_while_they_are_made_never_fails(cluster: Cluster) -> None:
    c = cluster
    statuses: list[int] = []
    stop = threading.Event()
    token = _token(c)

    def churn() -> None:  # make and revoke, below the bound, as fast as it goes
        with _http(c, token) as client:
            while not stop.is_set():
                made = client.post("/v1/tokens", json={"expires_s": 60}).json()
                client.delete(f"/v1/tokens/{made['token_id']}")

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        with _http(c, token) as client:
            for _ in range(150):
                statuses.append(client.get("/v1/tokens").status_code)
    finally:
        stop.set()
        worker.join()
    assert set(statuses) == {200}
    _revoke_all(c)


def _forecasts_made(c: Cluster) -> float:
    with c.api() as api:
        text = api.get("/metrics").text
    found = re.search(r"^podium_forecasts_total ([0-9.e+]+)$", text, re.M)
    assert found, "podium_forecasts_total is missing"
    return float(found[1])


def test_one_users_progress_reports_break_no_ones_forecast(
    cluster: Cluster, other_user: str
) -> None:
    c = cluster
    done = _as(c, other_user, "submit", "--parsable", "--gpus=2", "--wrap", "sleep 300")
    assert done.returncode == 0, done.stderr
    theirs = int(done.stdout)  # no time limit
    c.wait(theirs, {"RUNNING"})
    waiting = c.submit("--gpus=1", "-t", "10", "-J", "mine", "--wrap", "true")
    for done_units in ("0", "1e-290", "5e-324"):
        said = _as(c, other_user, "progress", done_units, "--of", "1e15", "--job", str(theirs))
        assert said.returncode == 0 and "Traceback" not in said.stderr, said.stderr
        time.sleep(1.1)
    with c.api() as api:
        answer = api.get("/v1/forecast")
        assert answer.status_code == 200
        json.loads(answer.text, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
        shown = api.get(f"/v1/jobs/{waiting}")
        assert shown.status_code == 200
    assert any("no time limit" in b["text"] for b in shown.json()["blockers"])
    for args in (("queue", "--start"), ("show", str(waiting)), ("queue", "--start", "--json")):
        result = c.cli(*args)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    # a user looping on `podium show` of a pending job costs one forecast, not one a call
    pending = _as(c, other_user, "submit", "--parsable", "--gpus=1", "-t", "5", "--wrap", "true")
    assert pending.returncode == 0, pending.stderr
    c.wait(int(pending.stdout), {"PENDING"})
    time.sleep(0.5)  # the pass that saw it
    before = _forecasts_made(c)
    with _http(c, _token(c, "--read-only", user=other_user)) as them:
        for _ in range(60):
            looked = them.get(f"/v1/jobs/{int(pending.stdout)}")
            assert looked.status_code == 200 and looked.json()["blockers"]
    assert _forecasts_made(c) - before <= 2
    assert _as(c, other_user, "cancel", pending.stdout.strip()).returncode == 0
    _revoke_all(c)
    c.cli("cancel", str(waiting), check=True)
    assert _as(c, other_user, "cancel", str(theirs)).returncode == 0
