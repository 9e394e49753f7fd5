"""The lean path of `podium submit`, `queue` and `cancel` (and Slurm's sbatch and
squeue): what each imports, measured with `python -X importtime` against a scripted
daemon. A heavy module creeping back onto these paths fails here."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from podium import __version__

ROOT = Path(__file__).resolve().parents[3]
PODIUM = ROOT / "scripts" / "podium"  # the installed `podium` command
SBATCH = "import sys; from podium.slurm_commands.entry import main; sys.exit(main(sys.argv[1:]))"

# Never on submit, cancel or sbatch; queue and squeue may also load `re` (squeue's
# format parsing) but nothing else here.
HEAVY = {
    "click", "pydantic", "yaml", "fastapi", "uvicorn", "starlette", "httpx", "psutil",
    "asyncio", "http", "email", "urllib", "typing", "json", "enum", "socket", "pathlib",
    "dataclasses", "inspect", "datetime", "secrets", "hashlib", "difflib", "shlex",
    "selectors", "subprocess", "podium.jobspec.build", "podium.jobspec.job", "podium.store",
}  # fmt: skip
QUEUE_ALLOWED = frozenset({"re", "enum"})  # squeue's format fields are read with a regex

RECORD = {"job_id": 7, "array_job_id": None, "display_id": "7", "name": "wrap", "user": "u"}
RECORD |= {"account": "a", "qos": "normal", "state": "PENDING", "elapsed_s": 0, "gpus": 0}
RECORD |= {"reason": "Priority", "node": None, "partition": "main", "node_count": 1}


def _answer(request: bytes) -> bytes:
    """The daemon's answer to one request line (enough for the lean commands)."""
    line = request.split(b"\r\n", 1)[0].decode()
    method, target, _ = line.split(" ", 2)
    path, _, query = target.partition("?")
    if method == "POST" and path == "/v1/jobs":
        body: object = {"jobs": [RECORD], "warnings": []}
    elif method == "POST" and path == "/v1/jobs/cancel":
        body = {"cancelled": [7]}
    elif path == "/v1/jobs" and "fields=" in query:
        fields = query.split("fields=", 1)[1].split("&", 1)[0].replace("%2C", ",").split(",")
        body = {"fields": fields, "rows": [[RECORD.get(f) for f in fields]]}
    else:
        body = {"error": f"unexpected {line}"}
    data = json.dumps(body).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    return head + b"Content-Length: %d\r\n\r\n" % len(data) + data


@pytest.fixture
def daemon(tmp_path: Path) -> Path:
    """A scripted daemon on HOME/podium.sock; yields HOME."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "podium.sock"))
    listener.listen(8)
    listener.settimeout(30)

    def run() -> None:
        with listener:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                with conn:
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    head, _, body = data.partition(b"\r\n\r\n")
                    length = next(
                        (int(h.split(b":")[1]) for h in head.split(b"\r\n")
                         if h.lower().startswith(b"content-length:")), 0,
                    )  # fmt: skip
                    while len(body) < length:
                        body += conn.recv(65536)
                    conn.sendall(_answer(data))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield tmp_path
    listener.close()


def _imports(home: Path, argv: list[str]) -> tuple[set[str], str]:
    """The modules `argv` (a Python command line) imports beyond a bare interpreter's,
    and its output."""
    env = dict(os.environ, PODIUM_HOME=str(home), PYTHONPATH=str(ROOT))
    env.pop("PODIUM_CONFIG", None)

    def loaded(args: list[str]) -> tuple[set[str], subprocess.CompletedProcess[str]]:
        run = subprocess.run(
            [sys.executable, "-X", "importtime", *args],
            capture_output=True, text=True, env=env, cwd=home, stdin=subprocess.DEVNULL,
            timeout=60,
        )  # fmt: skip
        names = {
            line.rsplit("|", 1)[1].strip()
            for line in run.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        }
        return names, run

    bare, _ = loaded(["-c", "pass"])
    names, run = loaded(argv)
    assert run.returncode == 0, run.stderr[-2000:]
    return names - bare, run.stdout


def _heavy(names: set[str], allowed: frozenset[str] = frozenset()) -> list[str]:
    """The heavy modules among `names` (a package's submodules count as the package)."""
    heavy = HEAVY - allowed
    return sorted(n for n in names if n in heavy or n.split(".")[0] in heavy)


def test_submit_loads_no_heavy_module(daemon: Path) -> None:
    names, out = _imports(daemon, [str(PODIUM), "submit", "--wrap", "true"])
    assert out == "Submitted batch job 7\n"
    assert "podium.cli.lean" in names and "click" not in names
    assert _heavy(names) == []


def test_sbatch_loads_no_heavy_module(daemon: Path) -> None:
    names, out = _imports(daemon, ["-c", SBATCH, "sbatch", "--parsable", "--wrap", "true"])
    assert out == "7\n"
    assert _heavy(names) == []


def test_cancel_loads_no_heavy_module(daemon: Path) -> None:
    names, out = _imports(daemon, [str(PODIUM), "cancel", "7"])
    assert out == "cancelled 7\n"
    assert _heavy(names) == []


def test_queue_and_squeue_load_no_heavy_module(daemon: Path) -> None:
    names, out = _imports(daemon, [str(PODIUM), "queue"])
    assert out.splitlines()[2].split()[:3] == ["7", "wrap", "u"]
    assert _heavy(names) == []
    names, out = _imports(daemon, ["-c", SBATCH, "squeue"])
    assert out.splitlines()[1].split() == [
        "7",
        "main",
        "wrap",
        "u",
        "PD",
        "0:00",
        "1",
        "(Priority)",
    ]
    assert _heavy(names, QUEUE_ALLOWED) == []


def test_other_forms_go_to_click(daemon: Path) -> None:
    names, out = _imports(daemon, [str(PODIUM), "queue", "--help"])
    assert "Usage: podium queue" in out and "click" in names


def test_version_and_a_missing_dependency_from_a_bare_python() -> None:
    """Issue 46: `podium --version` from a checkout whose dependencies are not installed
    printed a traceback (Click was missing). `python -S` sees the standard library only."""
    bare = [sys.executable, "-S", "-m", "podium"]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "PODIUM_HOME": "/nonexistent",
    }
    done = subprocess.run([*bare, "--version"], capture_output=True, text=True, env=env, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"podium, version {__version__}\n",
        "",
    )
    done = subprocess.run([*bare, "nodes"], capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("podium: nodes needs click, one of Podium's dependencies")
    assert len(done.stderr.splitlines()) == 1
