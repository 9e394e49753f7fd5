"""`python -m podium.slurm_commands TOOL ARGS...`: the same as the shims' `-c` entry
(podium.slurm_commands.entry)."""

from __future__ import annotations

import sys

from podium.slurm_commands.entry import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
