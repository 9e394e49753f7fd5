"""The embedded backend's small HTTP/1.1 client, against a scripted unix-socket peer."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from podium.backends.embedded.client import Client
from podium.errors import ApiError, DaemonUnavailable


def serve(path: Path, answers: list[bytes]) -> threading.Thread:
    """Answer each request on one connection with the next scripted bytes (b"" closes)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)

    def run() -> None:
        with listener:
            for answer in answers:
                conn, _ = listener.accept()
                with conn:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(4096)
                    conn.sendall(answer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def home_with(tmp_path: Path, answers: list[bytes]) -> Path:
    serve(tmp_path / "podium.sock", answers)
    return tmp_path


JSON = b"Content-Type: application/json\r\nConnection: close\r\n"


def test_a_chunked_json_answer_is_read_whole(tmp_path: Path) -> None:
    body = b'{"jobs": []}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    answer = b"HTTP/1.1 200 OK\r\n" + JSON + b"Transfer-Encoding: chunked\r\n\r\n" + chunked
    client = Client(home_with(tmp_path, [answer]))
    assert client.get("/v1/jobs") == {"jobs": []}


def test_an_error_answer_becomes_its_one_line(tmp_path: Path) -> None:
    body = b'{"error": "no job 7"}'
    answer = (
        b"HTTP/1.1 404 Not Found\r\n" + JSON + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    client = Client(home_with(tmp_path, [answer]))
    with pytest.raises(ApiError, match="no job 7") as err:
        client.get("/v1/jobs/7")
    assert err.value.status == 404


def test_a_cut_answer_to_a_read_is_retried_and_then_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PODIUM_RETRY_S", "1")
    cut = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: 100\r\n\r\n{"
    client = Client(home_with(tmp_path, [cut, b"", cut, b""]))
    with pytest.raises(DaemonUnavailable) as gave_up:
        client.get("/v1/ping")
    message = str(gave_up.value)
    assert "closed the connection before answering" in message
    assert "(retried for 1 s): it may have been carried out" in message


def test_a_daemon_back_within_the_window_answers_the_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The socket gone after a cut answer (a restart) is waited for, not 'no daemon'."""
    monkeypatch.setenv("PODIUM_RETRY_S", "10")
    body = b'{"ok": true}'
    ok = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    sock = tmp_path / "podium.sock"
    serve(sock, [b""])  # the first answer is cut
    client = Client(tmp_path)
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(client.get("/v1/ping")))
    thread.start()
    time.sleep(0.3)  # the cut answer is read: the client waits to send again
    sock.unlink(missing_ok=True)  # the daemon went away ...
    time.sleep(0.5)  # ... for a while, as a restarting daemon's socket is
    serve(sock, [ok])  # ... and is back
    thread.join(timeout=15)
    assert result == [{"ok": True}]


def test_a_cut_answer_to_a_submission_without_a_key_is_not_retried(tmp_path: Path) -> None:
    body = b'{"jobs": [{"job_id": 1}]}'
    ok = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    client = Client(home_with(tmp_path, [b"", ok]))
    with pytest.raises(DaemonUnavailable, match="not retried"):
        client.post("/v1/jobs", {"wrap": "true", "cwd": "/"})


def test_no_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnavailable, match="podium up"):
        Client(tmp_path).get("/v1/ping")


def test_a_client_told_not_to_wait_asks_a_stale_socket_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`podium up` and `down` probe with retry_s=0: a socket left by a killed daemon
    refuses at once, and they must not ride out a restart nobody is making (they
    waited 30 s after a crash)."""
    monkeypatch.setenv("PODIUM_RETRY_S", "30")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "podium.sock"))
    stale.close()  # bound, never listening: connections are refused
    with pytest.raises(DaemonUnavailable) as gave_up:
        Client(tmp_path, retry_s=0).get("/v1/ping")
    assert "refused the connection (retried for 0 s)" in str(gave_up.value)


def _free_tcp_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_over_http_a_refused_request_waits_for_the_daemon_to_come_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 43: over PODIUM_URL every request failed at once while the daemon restarted
    (nothing listens for a moment: the connection is refused), where the unix socket's
    client waited. A refused connection sent nothing, so any request (a submission
    without a key too) waits for the daemon within PODIUM_RETRY_S."""
    port = _free_tcp_port()
    monkeypatch.setenv("PODIUM_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("PODIUM_RETRY_S", "10")
    body = b'{"jobs": [{"job_id": 1}]}'
    ok = b"HTTP/1.1 200 OK\r\n" + JSON + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def later() -> None:
        time.sleep(0.5)  # the daemon is back after half a second
        listener = socket.create_server(("127.0.0.1", port))
        with listener:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(4096)
                conn.sendall(ok)

    threading.Thread(target=later, daemon=True).start()
    assert Client().post("/v1/jobs", {"wrap": "true", "cwd": "/"}) == {"jobs": [{"job_id": 1}]}


def test_over_http_no_daemon_at_all_is_said_after_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PODIUM_URL", f"http://127.0.0.1:{_free_tcp_port()}")
    monkeypatch.setenv("PODIUM_RETRY_S", "0.3")
    with pytest.raises(DaemonUnavailable, match=r"nothing listened there for 0\.3 s"):
        Client().get("/v1/ping")
