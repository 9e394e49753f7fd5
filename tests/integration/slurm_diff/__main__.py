"""Regenerate the golden outputs from the real Slurm (needs root and Debian's Slurm
packages: scripts/slurm-testbed/install.sh):

    python -m tests.integration.slurm_diff
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.integration.slurm_diff.runner import (
    GOLDEN,
    HERE,
    WORK,
    make_scenario,
    run_all,
    shell_runner,
    slurm_state,
    write_golden,
)

ROOT = HERE.parents[2]
PODIUM = str(Path(sys.executable).parent / "podium")


def main() -> int:
    directory = Path(tempfile.mkdtemp(prefix="podium-slurm-diff-"))
    subprocess.run(
        [PODIUM, "slurm", "render", str(HERE / "testbed.yaml"), "--testbed", str(directory),
         "--port-base", "18950"],
        check=True, capture_output=True,
    )  # fmt: skip
    up = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-testbed" / "up.sh"), str(directory),
         "--accounting"], capture_output=True, text=True,
    )  # fmt: skip
    if up.returncode != 0:
        print(up.stderr[-2000:], file=sys.stderr)
        return 1
    env = dict(os.environ, SLURM_CONF=str(directory / "etc" / "slurm.conf"))
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir()
    work = WORK
    try:
        run = shell_runner(env, work, podium=False)
        ids = make_scenario(run, slurm_state(env))
        results = run_all(run, ids, str(work))
        write_golden(results)
        print(f"{len(results)} command lines written to {GOLDEN}")
    finally:
        subprocess.run(["scancel", "-u", "root"], env=env, capture_output=True)
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "slurm-testbed" / "down.sh"), str(directory)],
            capture_output=True,
        )
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
