"""Entry point of the `podium` command (standard library only).

The commands people put in shell loops take a lean path that loads no Click,
pydantic or YAML (`podium.cli.lean`): submit, queue and cancel in the forms they are
usually given. Anything else (help, other commands, forms the lean path does not
know) goes to the full Click command (`podium.cli.app`), so usage messages stay one.
`tests/unit/cli/test_lean.py` fails when a heavy module creeps onto the lean path.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from typing import Any


def main(argv: list[str] | None = None) -> Any:
    """Run the `podium` command with `argv` (default: sys.argv[1:])."""
    args = sys.argv[1:] if argv is None else list(argv)
    from podium.cli.lean import run

    code = run(args)
    if code is not None:
        if argv is None:
            sys.exit(code)
        return code
    from podium.cli.app import main as full

    return full(args)


__all__ = ["main"]
