"""`python -m podium.compat TOOL ARGS...`: what the shims in bin/ run."""

from __future__ import annotations

import sys

from podium.compat.tools import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
