"""Bad input: one line saying what is wrong (and what would be right), exit code 2,
the daemon keeps running, and no accepted job is lost."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster

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
    ("#!/bin/bash\n#SBATCH --gpu=2\n", ["line 2", "unknown option --gpu", "did you mean --gpus?"]),
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
    ("#!/bin/bash\n#SBATCH --mail-type=END\n", ["no mail transport", "mail_command"]),
    ("#!/bin/bash\n#SBATCH --mem=1G --mem-per-cpu=1G\n", ["mutually exclusive"]),
    ("#!/bin/bash\n#SBATCH --exclude=node0\n", ["excludes the only node"]),
    ("#!/bin/bash\n#SBATCH --constraint=nvlink\n", ["lacks feature(s) ['nvlink']"]),
    ("#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n", ["GPU type 'a100'", "'h100'"]),
    ("#!/bin/bash\n#SBATCH --output=out-%q.log\n", ["unknown pattern %q"]),
    ("#!/bin/bash\n#SBATCH --chdir=/no/such/dir\n", ["is not a directory"]),
    ("#!/bin/bash\n#SBATCH --begin=someday\n", ["invalid begin time"]),
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
        ("gpus: [1, 2]\ncommand: true\n", "expected a single value"),
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
