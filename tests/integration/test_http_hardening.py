"""Issue 43's attacks on the HTTP listener, replayed on the real daemon: oversized and
endless bodies, clients that send their request a byte at a time, a Host the listener
does not have (DNS rebinding), a login posted from another origin, HEAD on read routes,
TLS when asked, and a client that rides out daemon restarts over HTTP as it does over
the unix socket."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.test_http_api import _free_port, _token

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    port = _free_port()
    c = make_cluster(gpus=2, cpus=4, extra=f"http: {{listen: '127.0.0.1:{port}'}}\n")
    c.start()
    c.port = port  # type: ignore[attr-defined]
    yield c
    teardown_cluster(c)


def _port(c: Cluster) -> int:
    return int(c.port)  # type: ignore[attr-defined]


def _rss_mb(c: Cluster) -> float:
    assert c.daemon_pid is not None
    return float(psutil.Process(c.daemon_pid).memory_info().rss) / 2**20


def _send_body(
    where: tuple[str, int] | str, head: bytes, body_mb: int, chunked: bool = False
) -> bytes:
    """Send `head` then up to `body_mb` MB of body as fast as the daemon takes it;
    return what it answered (the daemon may answer and close before it is all sent)."""
    family = socket.AF_UNIX if isinstance(where, str) else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(where)
        sock.sendall(head)
        block = b"x" * (1 << 20)
        try:
            for _ in range(body_mb):
                sock.sendall(b"100000\r\n" + block + b"\r\n" if chunked else block)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the end: what we want
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except (ConnectionResetError, TimeoutError):
            pass
    return answer


def test_bodies_are_bounded_before_they_are_read(cluster: Cluster) -> None:
    """500 MB to the unauthenticated /login took the root daemon from 74 to 1,071 MB;
    100 MB to an authenticated route was parsed whole before any check. Now each is
    a one-line 413 and the daemon's memory stays where it was."""
    c = cluster
    token = _token(c)
    before = _rss_mb(c)
    address = ("127.0.0.1", _port(c))
    head = b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 500000000\r\n\r\n"
    answer = _send_body(address, head, 500)
    assert answer.startswith(b"HTTP/1.1 413") and b"4 KiB" in answer, answer[:200]
    # no length given: cut as it passes the cap
    head = b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert _send_body(address, head, 100, chunked=True).startswith(b"HTTP/1.1 413")
    head = (
        b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b"\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    answer = _send_body(address, head, 100, chunked=True)
    assert answer.startswith(b"HTTP/1.1 413") and b"10 MiB" in answer, answer[:200]
    head = b"POST /v1/jobs HTTP/1.1\r\nHost: podium\r\nContent-Length: 104857600\r\n\r\n"
    answer = _send_body(str(c.home / "podium.sock"), head, 100)  # the unix socket too
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert _rss_mb(c) - before < 60, (before, _rss_mb(c))
    assert c.alive()
    with httpx.Client(base_url=f"http://127.0.0.1:{_port(c)}", timeout=30) as client:
        script = "#!/bin/bash\n" + "# padding\n" * 350_000  # 3.5 MB: under the 4 MiB bound
        made = client.post(
            "/v1/jobs", headers={"Authorization": f"Bearer {token}"},
            json={"script": script, "cwd": str(c.work), "options": ["--hold"]},
        )  # fmt: skip
        assert made.status_code == 200, made.text[:300]
        c.cli("cancel", str(made.json()["jobs"][0]["job_id"]), check=True)


def test_clients_that_send_their_request_slowly_are_cut_off(cluster: Cluster) -> None:
    """Half-sent requests were never timed out: now headers get 10 s, a body 10 s of
    silence; each such client gets a 408 while every other one is answered."""
    c = cluster
    address = ("127.0.0.1", _port(c))
    slow_head, slow_body = socket.create_connection(address), socket.create_connection(address)
    try:
        slow_head.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        slow_body.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\ntoken="
        )
        began = time.monotonic()
        for _ in range(3):  # the daemon answers meanwhile
            assert c.alive()
            time.sleep(1)
        for sock in (slow_head, slow_body):
            sock.settimeout(20)
            answer = b""
            while chunk := sock.recv(4096):  # until the daemon closes it
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 408") and b'"error"' in answer, answer
        assert 8 < time.monotonic() - began < 20
    finally:
        slow_head.close()
        slow_body.close()


def test_host_origin_and_head(cluster: Cluster) -> None:
    c = cluster
    url = f"http://127.0.0.1:{_port(c)}"
    token = _token(c, "--read-only")
    with httpx.Client(base_url=url, timeout=30) as client:
        for path in ("/metrics", "/openapi.json", "/login"):  # DNS rebinding: refused
            answer = client.get(path, headers={"Host": f"attacker.example:{_port(c)}"})
            assert answer.status_code == 400 and "http.host_names" in answer.json()["error"]
        assert client.get("/metrics", headers={"Host": f"localhost:{_port(c)}"}).is_success
        # login CSRF: a form posted by a page of another origin (another port here)
        forged = client.post(
            "/login", data={"token": token},
            headers={"Origin": "http://127.0.0.1:1", "Sec-Fetch-Site": "same-site"},
        )  # fmt: skip
        assert forged.status_code == 403 and "set-cookie" not in forged.headers
        own = client.post(
            "/login", data={"token": token},
            headers={"Origin": url, "Sec-Fetch-Site": "same-origin"},
        )  # fmt: skip
        assert own.status_code == 200 and "podium_session_" in own.headers["set-cookie"]
        # HEAD wherever GET is, for a read-only token too
        auth = {"Authorization": f"Bearer {token}"}
        for path in ("/v1/jobs", "/v1/forecast", "/v1/nodes", "/metrics"):
            head = client.head(path, headers=auth)
            assert head.status_code == 200 and head.content == b"", path
            assert int(head.headers["content-length"]) > 0  # the GET's length (times differ)


@pytest.fixture
def tls_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (.ci/run installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert),
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    port = _free_port()
    c = make_cluster(gpus=1, cpus=2, extra=(
        f"http: {{listen: '127.0.0.1:{port}', tls_cert: '{cert}', tls_key: '{key}'}}\n"
    ))  # fmt: skip
    c.start()
    c.port = port  # type: ignore[attr-defined]
    yield c, cert
    teardown_cluster(c)


def test_tls_when_asked(tls_cluster: tuple[Cluster, Path]) -> None:
    c, cert = tls_cluster
    url = f"https://127.0.0.1:{_port(c)}"
    token = _token(c, "--read-only")
    context = ssl.create_default_context(cafile=str(cert))
    with httpx.Client(base_url=url, verify=context, timeout=30) as client:
        assert client.get("/v1/ping", headers={"Authorization": f"Bearer {token}"}).is_success
        login = client.post("/login", data={"token": token})
        cookie = login.headers["set-cookie"]
        assert cookie.startswith(f"__Host-podium_session_{_port(c)}=pds_") and "Secure" in cookie
    with pytest.raises(httpx.HTTPError):  # plain HTTP is not answered there
        httpx.get(f"http://127.0.0.1:{_port(c)}/metrics", timeout=5)
    assert c.alive()  # and the unix socket stays plain
    remote = dict(c.env, PODIUM_URL=url, PODIUM_TOKEN=token, SSL_CERT_FILE=str(cert))
    listed = c.cli("queue", env=remote)
    assert listed.returncode == 0, listed.stderr
    untrusted = c.cli("queue", env=dict(remote, SSL_CERT_FILE="/nonexistent"))
    assert untrusted.returncode != 0 and "TLS with 127.0.0.1" in untrusted.stderr
    assert len(untrusted.stderr.strip().splitlines()) == 1


def test_the_http_client_rides_out_daemon_restarts(cluster: Cluster) -> None:
    """156 of 300 submits over HTTP failed during 10 restarts, where the unix socket's
    client lost none: now the HTTP client waits for the daemon as that one does."""
    c = cluster
    remote = dict(c.env, PODIUM_URL=f"http://127.0.0.1:{_port(c)}", PODIUM_TOKEN=_token(c))
    results: list[subprocess.CompletedProcess[str]] = []
    done = threading.Event()

    def submit_many() -> None:
        while not done.is_set() and len(results) < 400:
            name = f"r{len(results)}"
            results.append(c.cli("submit", "--parsable", "--hold", "-J", name,
                                 "--wrap", "true", env=remote))  # fmt: skip

    submitter = threading.Thread(target=submit_many)
    submitter.start()
    try:
        for _ in range(3):  # restarts while it submits
            time.sleep(1.0)
            c.stop()
            time.sleep(0.3)  # nothing listens for a moment
            c.start()
        time.sleep(0.5)  # the submitter's last requests meet the daemon up
    finally:
        done.set()
        submitter.join()
    failed = [r.stderr for r in results if r.returncode != 0]
    assert failed == [] and len(results) > 10
    ids = [int(r.stdout) for r in results]
    with c.api() as api:
        jobs = api.get("/v1/jobs").json()["jobs"]
    named = sorted(j["name"] for j in jobs if j["job_id"] in ids)
    assert len(set(ids)) == len(ids) and named == sorted(f"r{i}" for i in range(len(ids)))
    c.cli("cancel", *map(str, ids), check=True)
