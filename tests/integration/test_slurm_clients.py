"""The Slurm clients people already use, unmodified from PyPI, driving Podium's Slurm
commands end to end (issue 27): submitit, torchx, dask-jobqueue and Snakemake's slurm
executor, each in the virtual environment below (made once, cached outside the clone),
against a real daemon with `podium slurm-commands install DIR` first on PATH.

Every command a client runs is logged; the commands, normalized (ids, paths, run ids),
must be those in tests/integration/golden/slurm_clients/CLIENT.txt: a client that starts
using another command or option is seen here, and tests/unit/slurm_commands/test_client_outputs.py
replays those the clients parse against the shims' output. PODIUM_UPDATE_GOLDEN=1 rewrites
the lists (review the diff).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import BIN, PODIUM, Cluster, make_cluster, teardown_cluster

pytestmark = pytest.mark.integration

PINS = (
    "submitit==1.5.4",
    "torchx==0.7.0",
    "dask-jobqueue==0.9.0",
    "snakemake==9.27.1",
    "snakemake-executor-plugin-slurm==2.8.0",
)
HERE = Path(__file__).parent
FLOWS = HERE / "slurm_clients"
GOLDEN = HERE / "golden" / "slurm_clients"
TOOLS = ("sbatch", "squeue", "scancel", "scontrol", "sacct", "sinfo", "srun", "salloc")


def _cache_root() -> Path:
    return Path(os.environ.get("PODIUM_TEST_CACHE", "/var/tmp/podium-test-cache"))


def clients_venv() -> Path:
    """A virtual environment with the pinned clients, made once per set of pins and
    Python version under the cache (outside the clone). Its `.pth` adds this test
    interpreter's packages after its own, so jobs it starts import podium and torch."""
    key = hashlib.sha256(f"{sys.version}\n{PINS}".encode()).hexdigest()[:12]
    root = _cache_root()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"slurm-clients-{key}"
    with open(root / ".slurm-clients.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / "ready").exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--quiet", *PINS],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            pytest.fail(f"installing {' '.join(PINS)} from PyPI failed: {pip.stderr[-1500:]}")
        where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        site, ours = (
            subprocess.run(
                [python, "-c", where], capture_output=True, text=True, check=True
            ).stdout.strip()
            for python in (str(venv / "bin" / "python"), sys.executable)
        )
        Path(site, "zz-podium-tests.pth").write_text(ours + "\n")
        (venv / "ready").write_text("\n".join(PINS) + "\n")
    return venv


class Clients:
    """The cluster, the clients' environment and the log of the commands they ran."""

    def __init__(self, cluster: Cluster, venv: Path, base: Path) -> None:
        self.cluster = cluster
        self.venv = venv
        shims, logged = base / "shims", base / "logged"
        subprocess.run(
            [PODIUM, "slurm-commands", "install", str(shims)],
            check=True, capture_output=True, env=cluster.env,
        )  # fmt: skip
        logged.mkdir()
        self.log = base / "commands.log"
        for tool in TOOLS:  # each call: the tool, its arguments (US between), RS, newline
            path = logged / tool
            path.write_text(
                "#!/bin/sh\n"
                f'line="{tool}"\n'
                'for a in "$@"; do line="$line$(printf \'\\037\')$a"; done\n'
                f"printf '%s\\036\\n' \"$line\" >> {self.log}\n"
                f'exec {shims / tool} "$@"\n'
            )
            path.chmod(0o755)
        path = f"{logged}:{venv / 'bin'}:{BIN}:{os.environ['PATH']}"
        self.env = dict(cluster.env, PATH=path, HOME=str(base))
        self.env.pop("PYTHONPATH", None)

    def run(
        self, argv: list[str], cwd: Path, timeout: float = 420
    ) -> subprocess.CompletedProcess[str]:
        cwd.mkdir(parents=True, exist_ok=True)
        self.log.write_text("")
        return subprocess.run(
            argv, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip

    def flow(self, name: str, cwd: Path) -> dict[str, Any]:
        """Run FLOWS/NAME.py with the clients' Python; its JSON."""
        done = self.run([str(self.venv / "bin" / "python"), str(FLOWS / f"{name}.py")], cwd)
        assert done.returncode == 0, f"{name}: {done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def commands(self) -> list[list[str]]:
        text = self.log.read_text()
        return [r.lstrip("\n").split("\x1f") for r in text.split("\x1e") if r.strip()]


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX = re.compile(r"[0-9a-f]{32}|tmp[a-z0-9_]{8}")
_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?")
_IDS = re.compile(r"^\d+(\.(\d+|batch))?(,\d+)*$")


def normalized(argv: list[str]) -> str:
    """A command with what changes from run to run replaced: job ids (<id>; a run of
    `-j <id>` options as one and "..."), step ids (<step>), paths (<dir>/NAME; a working
    directory <dir>), run ids (<uuid>), times
    (<date>) and sbatch's --wrap command."""
    tool, words = argv[0], []
    for i, word in enumerate(argv[1:]):
        previous = argv[i] if i else ""
        if word.startswith("--wrap="):
            word = "--wrap=<command>"
        elif previous in ("-D", "--chdir"):
            word = "<dir>"
        elif _IDS.match(word) and (previous in ("-j", "--jobs") or tool in ("scancel", "scontrol")):
            word = re.sub(r"^\d+", "<id>", re.sub(r"\.\d+$", ".<step>", word))
            word = re.sub(r",\d+", ",<id>", word)
        word = _UUID.sub("<uuid>", word)
        word = _DATE.sub("<date>", word)
        if word.startswith("/"):
            word = "<dir>/" + word.rsplit("/", 1)[1]
        word = _HEX.sub("<hex>", word)
        words.append(word)
    text = " ".join([tool, *words])
    return re.sub(
        r"-j <id>(?![.\w])( -j <id>(?![.\w]))*", "-j <id> ...", text
    )  # how many: as it happens


def check_golden(client: str, commands: list[list[str]]) -> None:
    """The normalized commands `client` ran are those of its golden list."""
    seen = sorted({normalized(c) for c in commands})
    path = GOLDEN / f"{client}.txt"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(seen) + "\n")
    expected = path.read_text().splitlines()
    assert seen == expected, (
        f"{client} ran other Slurm commands than {path} lists:\n"
        f"new: {sorted(set(seen) - set(expected))}\ngone: {sorted(set(expected) - set(seen))}"
    )


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clients]:
    venv = clients_venv()
    cluster = make_cluster(gpus=4, cpus=16, kill_wait=3.0)
    cluster.start()
    try:
        yield Clients(cluster, venv, tmp_path_factory.mktemp("clients"))
    finally:
        teardown_cluster(cluster)


def test_submitit(clients: Clients, tmp_path: Path) -> None:
    """Every submitit row of issue 27's table: AutoExecutor picks Slurm, results, an
    array, an exception, 2 tasks with JobEnvironment, folder="logs/%j" (made after
    sbatch answers), several jobs in one sacct, cancel seen at once, a checkpointed job
    that times out, requeues itself and finishes, and job._interrupt()."""
    out = clients.flow("submitit_flow", tmp_path)
    assert out["cluster"] == "slurm"
    assert out["results"] == [0, 2, 4] and out["array"] == [0, 2, 4, 6]
    assert out["exception"] and "raised in the job" in out["exception"]
    assert out["ranks"] == [[0, 2], [1, 2]]
    assert out["watched"] == ["COMPLETED"] * 3
    assert out["cancelled"] == "CANCELLED"
    done, runs = out["timeout"]
    assert done == 12 and runs >= 2  # resumed from its checkpoint after each requeue
    assert out["interrupt"][0] == 6 and out["interrupt"][1] == 2
    commands = clients.commands()
    assert any(c[0] == "scancel" and c[2:] == ["--signal", "USR2"] for c in commands)
    assert any(c[0] == "sacct" and c.count("-j") > 1 for c in commands)
    check_golden("submitit", commands)


def test_torchx(clients: Clients, tmp_path: Path) -> None:
    """torchx run/status/log/cancel/list and dist.ddp -j 1x2 (gloo, 2 ranks)."""
    out = clients.flow("torchx_flow", tmp_path)
    assert out["echo_state"] == "SUCCEEDED"
    assert out["echo_log"].endswith("hello podium")
    assert out["ddp_state"] == "SUCCEEDED"
    assert [line.split(":", 1)[1] for line in out["ddp_log"]] == [
        "rank 0 world 2 sum 3",
        "rank 1 world 2 sum 3",
    ]
    assert out["cancelled_state"] == "CANCELLED"
    assert list(out["listed"].values()) == ["SUCCEEDED", "SUCCEEDED", "CANCELLED"]
    check_golden("torchx", clients.commands())


def test_dask_jobqueue(clients: Clients, tmp_path: Path) -> None:
    """SLURMCluster with log_directory ("-o .../dask-worker-%J.out"): two workers, a sum,
    and each worker's output where its %J put it."""
    out = clients.flow("dask_flow", tmp_path)
    assert out["sum"] == 5050 and out["workers"] == 2
    assert "%J" in out["script"]
    ids = sorted({name.split("-")[-1].split(".")[0] for name in out["logs"]})
    assert len(ids) == 2 and all(i.isdigit() for i in ids)
    assert out["logs"] == sorted(f"dask-worker-{i}.{ext}" for i in ids for ext in ("err", "out"))
    check_golden("dask", clients.commands())


@pytest.mark.parametrize("status", ["sacct", "squeue"])
def test_snakemake(clients: Clients, tmp_path: Path, status: str) -> None:
    """A workflow of four rules with one failing (--keep-going): the rules that can run
    do, the failure is reported as the rule's, its dependant never runs, and Snakemake
    exits 1, with the status checks through sacct or squeue."""
    shutil.copy(FLOWS / "Snakefile", tmp_path / "Snakefile")
    done = clients.run(
        [
            str(clients.venv / "bin" / "snakemake"), "--executor", "slurm", "--jobs", "3",
            "--keep-going", "--default-resources", "slurm_partition=main", "runtime=5",
            "mem_mb=1000", "--slurm-init-seconds-before-status-checks", "1",
            "--seconds-between-status-checks", "2", "--slurm-status-command", status,
        ],
        tmp_path,
    )  # fmt: skip
    log = done.stdout + done.stderr
    assert done.returncode == 1, log[-3000:]
    assert (tmp_path / "upper.txt").read_text().startswith("HELLO FROM ")
    assert not (tmp_path / "after_broken.txt").exists()
    assert "Error in rule broken" in log and "Error in rule hello" not in log, log[-3000:]
    assert "failed status checks" not in log.lower()
    check_golden(f"snakemake-{status}", clients.commands())


def test_golden_lists_name_only_commands_podium_serves() -> None:
    """Each golden command is one of the tools the shims serve."""
    for path in GOLDEN.glob("*.txt"):
        for line in path.read_text().splitlines():
            assert line.split()[0] in TOOLS, f"{path.name}: {line}"
