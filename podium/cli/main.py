"""Entry point of the `podium` command (standard library only).

The commands people put in shell loops take a lean path that loads no Click,
pydantic or YAML (`podium.cli.lean`): submit, queue and cancel in the forms they are
usually given. Anything else (help, other commands, forms the lean path does not
know) goes to the full Click command (`podium.cli.app`), so usage messages stay one.
`tests/unit/cli/test_lean.py` fails when a heavy module creeps onto the lean path.
`--version` is answered here too (Click's words), so it works from a checkout whose
dependencies are not installed; any other command that needs them says so in one line.
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
    if code is None and args[:1] == ["--version"]:
        from podium import __version__

        print(f"podium, version {__version__}")
        code = 0
    if code is not None:
        if argv is None:
            sys.exit(code)
        return code
    try:
        from podium.cli.app import main as full
    except ModuleNotFoundError as exc:
        print(
            f"podium: {' '.join(args[:1]) or 'this command'} needs {exc.name}, one of "
            "Podium's dependencies, which this Python lacks: install Podium "
            "(pip install -e . in the checkout, or pip install podium)",
            file=sys.stderr,
        )
        if argv is None:
            sys.exit(2)
        return 2
    return full(args)


__all__ = ["main"]
