"""What every Slurm command shim runs: `main([TOOL, *ARGS])`, loading only what TOOL
needs. The shims run `python3 -c ENTRY TOOL ARGS`, not `-m podium.compat` (runpy
costs ~9 ms a call). srun (every step) and the relay load only their own modules; the
other tools go through podium.compat.tools, which loads each tool's code when it is
called (sbatch is `podium submit`, down its lean path).
"""

from __future__ import annotations

import sys

ENTRY = "import sys; from podium.compat.entry import main; sys.exit(main(sys.argv[1:]))"


def main(argv: list[str]) -> int:
    """Run `argv[0]` with the rest of `argv`; its exit status."""
    tool = argv[0] if argv else ""
    if tool == "srun":
        from podium.compat.srun import main as srun

        return srun(argv[1:])
    if tool == "attach":
        from podium.compat.relay import main as attach

        return attach(argv[1:])
    from podium.compat.tools import main as tools  # light: sbatch is podium's lean submit

    return tools(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
