"""What every Slurm command shim runs: `main([TOOL, *ARGS])`, loading only what TOOL
needs. The shims run `python3 -c ENTRY TOOL ARGS`, not `-m podium.slurm_commands` (runpy
costs ~9 ms a call). srun (every step) and the relay load only their own modules; the
other tools go through podium.slurm_commands.job_tools, which loads each tool's code when it is
called (sbatch is `podium submit`, down its lean path).
"""

from __future__ import annotations

import sys

from podium.slurm_commands.srun_entry import srun_main

__all__ = ["ENTRY", "main", "srun_main"]  # srun_main: the srun shims import it from here

ENTRY = "import sys; from podium.slurm_commands.entry import main; sys.exit(main(sys.argv[1:]))"


def main(argv: list[str]) -> int:
    """Run `argv[0]` with the rest of `argv`; its exit status."""
    tool = argv[0] if argv else ""
    if tool == "srun":
        return srun_main(argv[1:])
    if tool == "attach":
        from podium.jobsteps.relay import main as attach

        return attach(argv[1:])
    from podium.slurm_commands.job_tools import (
        main as tools,  # light: sbatch is podium's lean submit
    )

    return tools(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
