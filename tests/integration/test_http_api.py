"""The HTTP listener on the real daemon: the same API over TCP, each request as the user
its bearer token names. No token, a bad one, an expired or a revoked one: 401. A
read-only token reads and never changes anything. A second Unix user's token has
exactly that user's rights. `podium` itself works through PODIUM_URL/PODIUM_TOKEN, and
the token is never kept or logged in the clear."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_permissions import _as, other_user
from tests.polling import wait_until

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, used here by name


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    port = _free_port()
    c = make_cluster(gpus=2, cpus=4, extra=f"http: {{listen: '127.0.0.1:{port}'}}\n")
    c.start()
    c.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    yield c
    teardown_cluster(c)


def _url(c: Cluster) -> str:
    return str(c.url)  # type: ignore[attr-defined]


def _token(c: Cluster, *args: str, user: str | None = None) -> str:
    made = _as(c, user, "token", "create", *args) if user else c.cli("token", "create", *args)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip().splitlines()[-1]  # alone on the last line
    assert token.startswith("pdm_") and " " not in token
    return token


def _http(c: Cluster, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.Client(base_url=_url(c), headers=headers, timeout=30)


def test_no_token_or_a_bad_one_is_401_and_the_schema_is_open(cluster: Cluster) -> None:
    c = cluster
    with _http(c) as anon:
        answer = anon.get("/v1/jobs")
        assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith(
            "Bearer")  # fmt: skip
        assert "no token" in answer.json()["error"]
        routes = anon.get("/openapi.json").json()["paths"]
        assert "/v1/tokens" in routes and "/v1/jobs" in routes
        for header in ("Bearer pdm_000000000000_" + "A" * 43, "Bearer x", "Basic abc", "Bearer"):
            bad = anon.get("/v1/jobs", headers={"Authorization": header})
            assert bad.status_code == 401, (header, bad.text)
        assert anon.post("/v1/jobs", json={"wrap": "true"}).status_code == 401


def test_the_cli_works_through_podium_url_and_the_token_is_kept_hashed(
    cluster: Cluster,
) -> None:
    c = cluster
    token = _token(c, "--expires", "1d")
    remote = dict(c.env, PODIUM_URL=_url(c), PODIUM_TOKEN=token)
    done = c.cli("submit", "--parsable", "--wrap", "id -un", env=remote)
    assert done.returncode == 0, done.stderr
    job = c.wait(int(done.stdout))
    assert job["state"] == "COMPLETED" and job["user"] == "root"
    listed = c.cli("queue", "--json", "--all", env=remote)
    assert listed.returncode == 0 and str(job["job_id"]) in listed.stdout, listed.stderr
    secret = token.split("_", 2)[2]
    for path in c.home.rglob("*"):
        if path.is_file() and path.suffix not in (".sock",):
            assert secret.encode() not in path.read_bytes(), path  # database, WAL, log
    with sqlite3.connect(c.home / "podium.db") as db:
        (digest,) = db.execute(
            "SELECT digest FROM tokens WHERE token_id=?", (token.split("_")[1],)
        ).fetchone()
    assert len(digest) == 64 and secret not in digest


def test_a_read_only_token_reads_and_changes_nothing(cluster: Cluster) -> None:
    c = cluster
    job_id = c.submit("--hold", "--wrap", "true")
    with _http(c, _token(c, "--read-only")) as ro:
        assert ro.get(f"/v1/jobs/{job_id}").json()["state"] == "PENDING"
        for method, path, body in (
            ("POST", "/v1/jobs", {"wrap": "true"}),
            ("POST", "/v1/jobs/cancel", {"job_ids": [job_id]}),
            ("POST", "/v1/tokens", {}),
        ):
            answer = ro.request(method, path, json=body)
            assert answer.status_code == 403 and "read-only" in answer.json()["error"]
    assert c.job(job_id)["state"] == "PENDING"
    c.cli("cancel", str(job_id), check=True)


def test_a_second_users_token_has_exactly_that_users_rights(
    cluster: Cluster, other_user: str
) -> None:
    c = cluster
    roots = c.submit("--hold", "--wrap", "true")
    refused = _as(c, other_user, "token", "create", "--user", "root")
    assert refused.returncode != 0 and "only an administrator" in refused.stderr
    theirs = _token(c, user=other_user)
    with _http(c, theirs) as them:
        assert them.get("/v1/ping").json()["you"] == other_user
        denied = them.post("/v1/jobs/cancel", json={"job_ids": [roots]})
        assert denied.status_code == 403 and "belongs to root" in denied.json()["error"]
        assert them.get(f"/v1/jobs/{roots}").status_code == 403  # its details are root's
        made = them.post("/v1/jobs", json={"wrap": "id -un", "cwd": str(c.work)})
        assert made.status_code == 200, made.text
        job = c.wait(made.json()["jobs"][0]["job_id"])
        assert job["user"] == other_user and job["state"] == "COMPLETED"
        mine = [t["token_id"] for t in them.get("/v1/tokens").json()["tokens"]]
        assert mine == [theirs.split("_")[1]]  # only their own tokens
        root_token = _token(c).split("_")[1]
        assert them.delete(f"/v1/tokens/{root_token}").status_code == 404
    assert c.job(roots)["state"] == "PENDING"
    c.cli("cancel", str(roots), check=True)


def test_revoked_and_expired_tokens_stop_at_once(cluster: Cluster) -> None:
    c = cluster
    token = _token(c)
    with _http(c, token) as client:
        assert client.get("/v1/jobs").status_code == 200
        assert c.cli("token", "revoke", token.split("_")[1]).returncode == 0
        assert client.get("/v1/jobs").status_code == 401
    short = c.cli("token", "create", "--expires", "2s", "--json")
    assert short.returncode == 0, short.stderr
    with _http(c, short.stdout.split('"token": "')[1].split('"')[0]) as client:
        assert client.get("/v1/jobs").status_code == 200
        wait_until(lambda: client.get("/v1/jobs").status_code == 401, "the token to expire", 10)
    listed = c.cli("token", "list").stdout  # a revoked token is forgotten, an expired one shown
    assert token.split("_")[1] not in listed and "expired" in listed and "pdm_" not in listed


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/jobs/999999", 404),
        ("GET", "/v1/jobs/abc", 400),
        ("GET", "/v1/jobs?user=" + "a" * 60_000, 200),  # no such user: no jobs
        ("DELETE", "/v1/tokens/nothex", 400),
        ("GET", "/v1/nothing", 404),
        ("GET", "/v1/jobs/999999/log", 404),
        ("GET", "/v1/jobs/1/log?stream=/etc/shadow", 400),
        ("GET", "/v1/jobs/1/log?max_bytes=99999999999", 400),
        ("GET", "/v1/jobs/1/log?max_bytes=-5", 400),
        ("GET", "/v1/health/events?limit=0", 400),
        ("GET", "/v1/health/events?limit=" + "9" * 5000, 400),
        ("GET", "/v1/gpus/telemetry", 200),
        ("GET", "/v1/forecast?" + "x=1&" * 5000, 200),  # unknown parameters are ignored
    ],
)
def test_bad_requests_get_a_clean_4xx(
    cluster: Cluster, method: str, path: str, status: int
) -> None:
    c = cluster
    with _http(c, _token(c)) as client:
        answer = client.request(method, path)
        assert answer.status_code == status, (answer.status_code, answer.text[:200])
        if status >= 400:
            assert "error" in answer.json()
    assert c.alive()


def test_job_ids_in_paths_are_read_strictly(cluster: Cluster) -> None:
    """Issue 60, item 5: `/v1/jobs/1_0` acted on job 10 (Python's int() reads `1_0`
    as 10, `+1`, `01` and `1.0`... as 1). Now ARRAY_INDEX names an array task, as
    the CLI reads it, and anything else but plain digits is refused in one line."""
    c = cluster
    array = c.submit("--array=0-1", "--wrap", "sleep 60")
    with _http(c, _token(c)) as client:
        wait_until(lambda: client.get(f"/v1/jobs/{array}_1").json().get("state") == "RUNNING",
                   "array task 1 to run", 30)  # fmt: skip
        assert client.get(f"/v1/jobs/{array}_1").json()["display_id"] == f"{array}_1"
        limited = client.post(f"/v1/jobs/{array}_0/time-limit", json={"time_limit_s": 600})
        assert limited.status_code == 200 and limited.json()["display_id"] == f"{array}_0"
        for bad in (f"+{array}", f"0{array}", f"{array}.0", f"{array}_01", f"{array}_",
                    f"{array}__1", "%2B1", "1e1", "9" * 11):  # fmt: skip
            answer = client.get(f"/v1/jobs/{bad}")
            assert answer.status_code == 400, (bad, answer.text)
            error = answer.json()["error"]
            assert error.startswith("invalid request: job_id: ") and "\n" not in error
            assert "give a job id (digits, no sign or leading zero" in error
        assert client.get(f"/v1/jobs/{array}_7").status_code == 404
        assert client.post("/v1/jobs/cancel", json={"job_ids": [array]}).status_code == 200


def test_bad_listen_addresses_are_one_line(tmp_path: object) -> None:
    c = make_cluster(gpus=1, cpus=2)
    try:
        for listen, words in (("8686", "give HOST:PORT"), ("example.com:80", "IP address")):
            up = c.cli("up", "--http", listen)
            assert up.returncode != 0 and words in up.stderr, up.stderr
            assert len(up.stderr.strip().splitlines()) == 1
    finally:
        teardown_cluster(c)


def test_every_route_of_the_openapi_document_is_in_docs_api_md(cluster: Cluster) -> None:
    with httpx.Client(base_url=_url(cluster), timeout=10) as anon:
        document = anon.get("/openapi.json").json()
    docs = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    routes = [f"`{m.upper()} {p}`" for p, ops in document["paths"].items() for m in ops]
    assert len(routes) > 30
    missing = [r for r in routes if r not in docs]
    assert not missing, f"add to docs/api.md's table: {missing}"
