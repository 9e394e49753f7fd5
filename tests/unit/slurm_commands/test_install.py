"""`podium slurm-commands install DIR`: the commands outside jobs, only where asked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from podium.errors import SpecError
from podium.slurm_commands.install import TOOLS, write_commands


def test_commands_are_written_only_where_asked_and_never_over_a_file(tmp_path: Path) -> None:
    target = tmp_path / "bin"
    paths = write_commands(target, sys.executable, force=False)
    assert sorted(p.name for p in paths) == sorted(TOOLS)
    assert all(os.access(p, os.X_OK) for p in paths)
    run = subprocess.run(
        [str(target / "scontrol"), "show", "hostnames", "gpu[1-2]"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (run.returncode, run.stdout) == (0, "gpu1\ngpu2\n"), run.stderr
    with pytest.raises(SpecError, match="exists: pick an empty directory, or --force"):
        write_commands(target, sys.executable, force=False)
    (target / "squeue").write_text("#!/bin/sh\necho mine\n")
    write_commands(target, sys.executable, force=True)
    assert (
        "podium.slurm_commands.entry import main; sys.exit(main(sys.argv[1:]))' squeue"
        in (target / "squeue").read_text()
    )


def test_a_python_path_with_quotes_is_quoted(tmp_path: Path) -> None:
    (path, *_) = write_commands(tmp_path, "/opt/it's here/python3", force=False)
    assert (
        "exec '/opt/it'\\''s here/python3' -c 'import sys; from podium.slurm_commands"
        in path.read_text()
    )
