"""What every Slurm command shim runs: `main([TOOL, *ARGS])`, loading only what TOOL
needs. The shims run `python3 -c ENTRY TOOL ARGS`, not `-m podium.compat` (runpy
costs ~9 ms a call). srun (every step) and sbatch (scripts call it in loops) take lean
paths: sbatch is `podium submit`, down its lean path; the other tools load
podium.compat.tools.
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
    if tool == "sbatch":
        from podium.cli.main import main as podium

        return int(podium(["submit", *argv[1:]]) or 0)
    from podium.compat.tools import main as tools

    return tools(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
