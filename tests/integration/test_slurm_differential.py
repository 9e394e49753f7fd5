"""Slurm's commands on Podium beside a real Slurm 22.05, command line by command line
(issue 45): the scenario of tests/integration/slurm_diff/commands.py made on Podium's
embedded cluster (its node and partition are the one-node test Slurm's), every command
line run through Podium's shims, and each output compared with what the real Slurm
printed for the same line (the golden file `python -m tests.integration.slurm_diff`
writes). Outputs are normalised only for times, durations and paths; a difference
fails unless `DELIBERATE` lists it with its reason."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, make_cluster, teardown_cluster
from tests.integration.slurm_diff.commands import COMMANDS, DELIBERATE
from tests.integration.slurm_diff.runner import (
    HERE,
    WORK,
    make_scenario,
    read_golden,
    run_all,
    shell_runner,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def podium_side() -> Iterator[tuple[Cluster, dict[str, object]]]:
    c = make_cluster()
    (c.home / "cluster.yaml").write_text((HERE / "cluster.yaml").read_text())
    c.start()
    env = dict(c.env, PYTHONPATH=os.pathsep.join(sys.path))
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    run = shell_runner(env, WORK, podium=True)

    def state_of(job_id: int) -> str:
        done = subprocess.run(
            [c.env["PATH"].split(":")[0] + "/podium", "show", str(job_id), "--json"],
            capture_output=True, text=True, env=c.env,
        )  # fmt: skip
        return str(json.loads(done.stdout)["state"]) if done.returncode == 0 else "UNKNOWN"

    try:
        ids = make_scenario(run, state_of)
        results = {str(r["cmd"]): r for r in run_all(run, ids, str(WORK))}
        yield c, results
    finally:
        teardown_cluster(c)
        shutil.rmtree(WORK, ignore_errors=True)


def test_at_least_300_command_lines_and_a_golden_for_each() -> None:
    golden = read_golden()
    assert len(COMMANDS) >= 300, len(COMMANDS)
    missing = [" ".join(w) for w in COMMANDS if " ".join(w) not in golden]
    assert not missing, (
        f"regenerate the golden file (python -m tests.integration.slurm_diff): {missing[:5]}"
    )


def test_podium_prints_what_slurm_prints(podium_side: tuple[Cluster, dict[str, object]]) -> None:
    _, results = podium_side
    golden = read_golden()
    differ: list[str] = []
    for cmd, mine in results.items():
        theirs = golden[cmd]
        same = mine["rc"] == theirs["rc"] and mine["out"] == theirs["out"]
        if not same and cmd not in DELIBERATE:
            diff = "\n".join(difflib.unified_diff(
                str(theirs["out"]).splitlines(), str(mine["out"]).splitlines(),
                "slurm", "podium", lineterm="", n=0))  # fmt: skip
            differ.append(f"$ {cmd} (rc slurm {theirs['rc']}, podium {mine['rc']})\n{diff}")
    report = Path(os.environ.get("PODIUM_DIFF_REPORT", "/tmp/podium-slurm-diff.txt"))
    report.write_text("\n\n".join(differ))
    total = len(results)
    stale = [
        cmd for cmd in DELIBERATE
        if results[cmd]["rc"] == golden[cmd]["rc"] and results[cmd]["out"] == golden[cmd]["out"]
    ]  # fmt: skip
    assert not stale, f"these print as Slurm's now: take them off DELIBERATE: {stale}"
    print(f"{total} command lines: {total - len(DELIBERATE) - len(differ)} as Slurm's, "
          f"{len(DELIBERATE)} deliberately not, {len(differ)} unexplained")  # fmt: skip
    assert not differ, (
        f"{len(differ)} of {total} command lines differ from Slurm's (all in {report}); "
        f"the first:\n" + "\n\n".join(differ[:3])
    )


def test_the_docs_table_is_the_suites_own() -> None:
    """docs/slurm-compat.md's "Held to a real Slurm" table is made from the option
    tables and the suite's command lines: an option added, a line added or a difference
    fixed without rewriting it (python -m tests.integration.slurm_diff.table) fails."""
    from tests.integration.slurm_diff import table

    text = table.DOC.read_text()
    assert table.BEGIN in text and table.END in text
    shown = table.BEGIN + text.split(table.BEGIN, 1)[1].split(table.END, 1)[0] + table.END
    assert shown == table.section(), "rewrite it: python -m tests.integration.slurm_diff.table"
