"""Bad input: one line saying what is wrong (and what would be right), exit code 2,
the daemon keeps running, and no accepted job is lost."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conformance import check_backend
from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.http_wire import read_message
from tests.polling import poll, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[Cluster, list[int]]]:
    """A daemon holding some accepted jobs that every bad request must leave intact."""
    c = make_cluster()
    c.start()
    accepted = [c.submit("--hold", "-J", f"keep{i}", "--wrap", "true") for i in range(3)]
    try:
        yield c, accepted
    finally:
        teardown_cluster(c)


def _all_ids(c: Cluster) -> list[int]:
    return [j["job_id"] for j in json.loads(c.cli("queue", "--all", "--json", check=True).stdout)]


def _assert_refused(c: Cluster, accepted: list[int], result: object, *needles: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)  # type: ignore[attr-defined]
    err = result.stderr.strip()  # type: ignore[attr-defined]
    assert err.startswith("podium: ") and "\n" not in err, err
    for needle in needles:
        assert needle in err, err
    assert c.alive()
    assert _all_ids(c) == accepted


SCRIPT_CASES = [
    ("echo no shebang\n", ["does not start with #!"]),
    (
        "#!/bin/bash\n#SBATCH --gpu=2\n",
        ["line 2", "option '--gpu' is ambiguous", "did you mean --gpus?"],
    ),
    ("#!/bin/bash\n#SBATCH --job-nmae=x\n", ["did you mean --job-name?"]),
    (
        "#!/bin/bash\n\n#SBATCH --reservation=big\n",
        ["line 3", "--reservation", "no advance reservations"],
    ),
    ("#!/bin/bash\n#SBATCH --job-name='unterminated\n", ["line 2", "cannot parse directive"]),
    ("#!/bin/bash\n#SBATCH --wrap=hostname\n", ["only valid on the command line"]),
    ("#!/bin/bash\n#SBATCH --time=abc\n", ["--time", "invalid time 'abc'", "UNLIMITED"]),
    ("#!/bin/bash\n#SBATCH --mem=lots\n", ["--mem", "invalid memory size"]),
    ("#!/bin/bash\n#SBATCH --ntasks=0\n", ["--ntasks", "at least 1"]),
    ("#!/bin/bash\n#SBATCH --array=5-1\n", ["--array", "backwards"]),
    ("#!/bin/bash\n#SBATCH --signal=FOO@10\n", ["--signal", "unknown signal 'FOO'"]),
    ("#!/bin/bash\n#SBATCH --gres=fpga:1\n", ["unknown generic resource 'fpga'"]),
    (
        "#!/bin/bash\n#SBATCH --dependency=afterfoo:1\n",
        ["unknown dependency type 'afterfoo'", "did you mean"],
    ),
    ("#!/bin/bash\n#SBATCH --gpus=8\n", ["asks for 8 GPUs but node node0 has 4"]),
    ("#!/bin/bash\n#SBATCH --nodes=2\n", ["has 1 node", "backend: slurm"]),
    ("#!/bin/bash\n#SBATCH --mem=1T\n", ["MiB of memory but node node0 has 16000"]),
    ("#!/bin/bash\n#SBATCH --cpus-per-task=9\n", ["9 CPUs but node node0 has 8"]),
    ("#!/bin/bash\n#SBATCH -p short\n#SBATCH -t 1:00:00\n", ["exceeds partition short's max time"]),
    ("#!/bin/bash\n#SBATCH --partition=shrot\n", ["no partition 'shrot'", "did you mean short?"]),
    ("#!/bin/bash\n#SBATCH --qos=urgent\n", ["no QoS 'urgent'", "high, normal, low"]),
    ("#!/bin/bash\n#SBATCH --mail-type=BEGN\n", ["unknown mail type 'BEGN'"]),
    ("#!/bin/bash\n#SBATCH --mem-per-cpu=0\n", ["--mem-per-cpu", "at least 1M"]),
    ("#!/bin/bash\n#SBATCH --mem=1G --mem-per-cpu=1G\n", ["mutually exclusive"]),
    ("#!/bin/bash\n#SBATCH --exclude=node0\n", ["excludes the only node"]),
    ("#!/bin/bash\n#SBATCH --constraint=nvlink\n", ["lacks feature(s) ['nvlink']"]),
    ("#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n", ["GPU type 'a100'", "'h100'"]),
    ("#!/bin/bash\n#SBATCH --output=out-%q.log\n", ["unknown pattern %q"]),
    ("#!/bin/bash\n#SBATCH --chdir=/no/such/dir\n", ["is not a directory"]),
    ("#!/bin/bash\n#SBATCH --begin=someday\n", ["invalid begin time"]),
    ("#!/bin/bash\n#SBATCH -o %99999999999j\n", ["zero-padding", "at most 10"]),
    ("#!/bin/bash\n#SBATCH --array=0-50000000\n", ["MaxArraySize=1001"]),
    ("#!/bin/bash\n#SBATCH --array=0-500,501-1000,0-5%2\n", ["at most 1001 tasks"]),
    ("#!/bin/bash\n#SBATCH --ntasks=99999999999999999999\n", ["--ntasks", "at most"]),
    ("#!/bin/bash\n#SBATCH --time=99999999999999\n", ["at most 2147483647 s"]),
    ("#!/bin/bash\n#SBATCH --cpus-per-task=²\n", ["expected an integer"]),
    ("#!/bin/bash\n#SBATCH --mail-user=-oProxyCommand=x\n", ["e-mail address"]),
]


@pytest.mark.parametrize(
    "script,needles", SCRIPT_CASES, ids=[str(i) for i in range(len(SCRIPT_CASES))]
)
def test_bad_scripts(guarded: tuple[Cluster, list[int]], script: str, needles: list[str]) -> None:
    c, accepted = guarded
    path = c.work / "bad.sh"
    path.write_text(script)
    result = c.cli("submit", str(path))
    _assert_refused(c, accepted, result, *needles)


CLI_CASES = [
    (["submit", "--wrap"], ["--wrap needs a value"]),
    (["submit", "--hold=yes", "--wrap", "true"], ["--hold takes no value"]),
    (["submit", "-Z", "--wrap", "true"], ["unknown option -Z"]),
    (["submit", "/no/such/script.sh"], ["cannot read batch script /no/such/script.sh"]),
    (["submit"], ["nothing to run"]),
    (["submit", "--dependency=afterok:424242", "--wrap", "true"], ["no job 424242"]),
    (["submit", "-f", "/no/such.yaml"], ["cannot read job file"]),
    (["show", "abc"], ["'abc' is not a job id"]),
    (["show", "99999"], ["no job 99999"]),
    (["cancel", "99999"], ["no job 99999"]),
    (["queue", "--state", "RUNING"], ["unknown state 'RUNING'"]),
    (["resume", "node0"], ["neither drained nor fenced"]),
    (["drain", "nodeX", "--reason", "x"], ["no node 'nodeX'"]),
    (["drain", "node0", "--reason", " "], ["needs a reason"]),
    (["submitt", "x"], ["no command 'submitt'", "did you mean 'submit'"]),
    (
        ["submit", "--dependency=afterok:9223372036854775808", "--wrap", "true"],
        ["expected job ids (1-4294967294)"],
    ),
    (["show", "9223372036854775808"], ["invalid request", "job_id"]),
    (["cancel", "99999999999999999999"], ["invalid request", "job_ids"]),
]


@pytest.mark.parametrize("args,needles", CLI_CASES, ids=[" ".join(a) for a, _ in CLI_CASES])
def test_bad_command_lines(
    guarded: tuple[Cluster, list[int]], args: list[str], needles: list[str]
) -> None:
    c, accepted = guarded
    _assert_refused(c, accepted, c.cli(*args), *needles)


def test_bad_job_yaml(guarded: tuple[Cluster, list[int]]) -> None:
    c, accepted = guarded
    cases = [
        ("gpus: [1, 2]\ncommand: true\n", "expected one value"),
        ("gpuz: 1\ncommand: true\n", "did you mean"),
        ("command: true\nscript: '#!/bin/sh'\n", "either 'script' or 'command'"),
        ("- just\n- a list\n", "expected a mapping"),
        ("a: [unclosed\n", "not valid YAML"),
    ]
    for text, needle in cases:
        (c.work / "bad.yaml").write_text(text)
        _assert_refused(c, accepted, c.cli("submit", "-f", "bad.yaml"), needle)


def _raw(c: Cluster, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(c.home / "podium.sock"))
        sock.sendall(payload)
        try:
            sock.shutdown(socket.SHUT_WR)
            return sock.recv(65536)
        except OSError:
            return b""


def test_garbage_over_the_socket(guarded: tuple[Cluster, list[int]]) -> None:
    c, accepted = guarded
    garbage = [
        b"\x00\xff\xfe garbage \r\n\r\n",
        b"NOT-HTTP\r\n\r\n",
        b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n",
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{bad",
        b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n",
        b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n{",  # truncated
        b"",
    ]
    for payload in garbage:
        _raw(c, payload)
        assert c.alive()
    with c.api() as api:
        assert api.post("/v1/jobs", content=b"{not json").status_code in (400, 422)
        r = api.post("/v1/jobs", json={"cwd": 5, "script": ["x"]})
        assert r.status_code == 400 and "invalid request" in r.json()["error"]
        r = api.post("/v1/jobs", json={"cwd": "/tmp", "script": "#!/bin/sh\n", "bogus": 1})
        assert r.status_code == 400 and "bogus" in r.json()["error"]
        r = api.post("/v1/jobs", json={"cwd": "relative", "wrap": "true"})
        assert r.status_code == 400 and "absolute" in r.json()["error"]
        assert api.get("/v1/nothing-here").status_code == 404
        assert api.delete("/v1/jobs").status_code == 405
        assert api.post("/v1/jobs/cancel", json={"job_ids": ["x"]}).status_code == 400
        r = api.post(
            "/v1/jobs",
            json={"cwd": "/tmp", "wrap": "true", "options": ["--gpus=1\n#SBATCH --nodes=9"]},
        )
        assert r.status_code == 400
        # Lone surrogates and NULs anywhere, '=' in environment names: 400, never 500.
        for body in (
            b'{"cwd": "/tmp", "wrap": "echo \\ud800"}',
            b'{"cwd": "/tmp", "wrap": "true", "options": ["-J", "\\udfff"]}',
            b'{"cwd": "/tmp\\ud800", "wrap": "true"}',
            b'{"cwd": "/tmp", "wrap": "true", "environment": {"A\\ud800": "1"}}',
            b'{"cwd": "/tmp", "wrap": "true", "environment": {"A=B": "1"}}',
            b'{"cwd": "/tmp", "wrap": "true", "environment": {"A": "x\\u0000y"}}',
            b'{"cwd": "/tmp\\u0000/x", "wrap": "true"}',
            b'{"job_ids": [9223372036854775808]}',
            b'{"name": "\\ud800"}',
        ):
            path = "/v1/jobs/cancel" if b"job_ids" in body or b"name" in body else "/v1/jobs"
            r = api.post(path, content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 400, (body, r.status_code, r.text)
            assert "invalid request" in r.json()["error"]
        assert api.get("/v1/jobs/9223372036854775808").status_code == 400
    assert c.alive()
    assert _all_ids(c) == accepted
    # and it still works
    job_id = c.submit("--wrap", "true")
    assert c.wait(job_id)["state"] == "COMPLETED"
    c.cli("cancel", "--state", "COMPLETED", "--name", "nothing")  # harmless
    accepted.append(job_id)


def test_bad_cluster_config_is_one_line() -> None:
    c = make_cluster()
    try:
        (c.home / "cluster.yaml").write_text("nodee:\n  cpus: 4\n")
        result = c.cli("up")
        assert result.returncode == 2
        assert result.stderr.strip() == (
            f"podium: cluster config {c.home}/cluster.yaml: unknown key 'nodee' "
            "(did you mean 'node'?)"
        )
        (c.home / "cluster.yaml").write_text("node:\n  gpus:\n    cuont: 4\n")
        result = c.cli("up")
        assert (
            result.returncode == 2 and "'node.gpus.cuont' (did you mean 'count'?)" in result.stderr
        )
        (c.home / "cluster.yaml").write_text("node:\n  cpus: many\n")
        result = c.cli("up")
        assert result.returncode == 2 and "node.cpus" in result.stderr
    finally:
        teardown_cluster(c)


def test_a_job_that_breaks_its_own_start_is_held_and_others_run(cluster: Cluster) -> None:
    c = cluster
    first = c.submit("--hold", "--wrap", "true")
    blocker = c.home / "jobs" / str(first + 1)
    blocker.parent.mkdir(exist_ok=True)
    blocker.write_text("a file where the next job's directory would go")
    broken = c.submit("--wrap", "true")
    assert broken == first + 1
    held = c.wait(broken, states={"PENDING"})
    held = poll(lambda: c.job(broken), lambda j: "launch failed" in j["reason"],
                "the broken job held for its launch failure", 20)  # fmt: skip
    assert held["state"] == "PENDING" and held["held"]
    assert "launch failed: FileExistsError" in held["reason"]
    fine = c.submit("--wrap", "true")
    assert c.wait(fine)["state"] == "COMPLETED"
    # A job whose stored spec cannot be read at all is held too, once.
    unreadable = c.submit("--begin=now+1hours", "--wrap", "true")
    c.stop()  # as a damaged row, read by the next daemon
    with sqlite3.connect(c.home / "podium.db") as db:
        db.execute("UPDATE jobs SET spec='{not json', brief=NULL WHERE job_id=?", (unreadable,))
    c.start()
    wait_until(lambda: c.job(unreadable)["held"], "the unreadable job held", 20)
    assert "unreadable job" in c.job(unreadable)["reason"]
    again = c.submit("--wrap", "true")
    assert c.wait(again)["state"] == "COMPLETED"
    log = (c.home / "podiumd.log").read_text()
    assert log.count(f"job {unreadable} held") == 1


@pytest.mark.parametrize("damage", ["empty", "corrupt"])
def test_a_damaged_database_is_refused_with_the_reason(damage: str) -> None:
    c = make_cluster()
    try:
        c.start()
        batch = c.work / "history.txt"
        batch.write_text("--hold -J history --wrap true\n" * 200)
        c.cli("submit", "--batch", str(batch), check=True)  # 200 rows
        c.stop()
        db = c.home / "podium.db"
        if damage == "empty":
            db.write_bytes(b"")
        else:
            data = bytearray(db.read_bytes())
            data[8192:16384] = b"\xa5" * 8192  # pages 3-4 of 4 KiB
            db.write_bytes(bytes(data))
            (c.home / "podium.db-wal").unlink(missing_ok=True)
        result = c.cli("up")
        assert result.returncode == 1
        line = result.stderr.strip()
        assert "\n" not in line and str(db) in line and "see podiumd.log" not in line
        assert ("empty (0 bytes)" if damage == "empty" else "is damaged") in line
        assert "move it aside" in line
        assert not (c.home / "podium.sock").exists()
    finally:
        teardown_cluster(c)


class _DropFirstSubmitAnswer(threading.Thread):
    """A unix-socket proxy to the daemon that forwards every request but, for the first
    submission, closes the client's connection instead of passing the answer back: the
    job was committed, the client never heard."""

    def __init__(self, listen: Path, daemon: Path) -> None:
        super().__init__(daemon=True)
        self.daemon_path = daemon
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(listen))
        self.server.listen(8)
        self.server.settimeout(0.2)
        self.dropped = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except TimeoutError:
                continue
            with client:
                client.settimeout(10)
                while True:
                    request = read_message(client)
                    if not request:
                        break
                    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as up:
                        up.connect(str(self.daemon_path))
                        up.sendall(request.replace(b"keep-alive", b"close"))
                        answer = b""
                        while chunk := up.recv(65536):
                            answer += chunk
                    if request.startswith(b"POST /v1/jobs ") and not self.dropped:
                        self.dropped += 1
                        break  # the daemon committed the job; the client hears nothing
                    client.sendall(answer)
                    break


def test_a_retried_submission_creates_one_job(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    client_home = tmp_path / "client"
    client_home.mkdir()
    proxy = _DropFirstSubmitAnswer(client_home / "podium.sock", c.home / "podium.sock")
    proxy.start()
    try:
        env = dict(c.env, PODIUM_HOME=str(client_home))
        result = c.cli("submit", "--parsable", "-J", "once-only", "--hold", "--wrap", "true",
                       env=env)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert proxy.dropped == 1
        jobs = [j for j in json.loads(c.cli("queue", "--json", check=True).stdout)
                if j["name"] == "once-only"]  # fmt: skip
        assert [j["job_id"] for j in jobs] == [int(result.stdout)]
    finally:
        proxy.stop.set()
        proxy.join(5)
        proxy.server.close()


def test_the_embedded_backend_meets_the_conformance_check(
    guarded: tuple[Cluster, list[int]],
) -> None:
    c, accepted = guarded
    check_backend(lambda *args: c.cli(*args))
    assert c.alive() and _all_ids(c) == accepted
