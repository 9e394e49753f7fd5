"""`python -m podium.compat TOOL ARGS...`: what the shims in bin/ run. srun, on every
step's path, imports only what a step needs."""

from __future__ import annotations

import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["srun"]:
        from podium.compat.srun import main as srun

        sys.exit(srun(sys.argv[2:]))
    if sys.argv[1:2] == ["attach"]:
        from podium.compat.relay import main as attach

        sys.exit(attach(sys.argv[2:]))
    from podium.compat.tools import main

    sys.exit(main(sys.argv[1:]))
