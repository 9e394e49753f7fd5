"""`python -m podium.compat TOOL ARGS...`: the same as the shims' `-c` entry
(podium.compat.entry)."""

from __future__ import annotations

import sys

from podium.compat.entry import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
