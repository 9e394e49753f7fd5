"""JSON without importing the json package: for paths where start-up time counts (the
lean client, srun's step records).

`import json` costs ~10 ms in a new interpreter here, because json.decoder and
json.encoder load `re` (and with it enum, functools and collections). Both halves of
the work are done by CPython's C accelerator `_json`, which json itself uses:
- `loads` drives `_json.make_scanner` with the settings json.loads uses by default
  (strict strings; NaN and Infinity accepted) and, for text it cannot read, asks the
  json package for the exact error (ValueError);
- `dumps` writes compact JSON of None, booleans, numbers, strings, lists, tuples and
  dicts (NaN and infinities as null), escaping strings with `_json`.
Where `_json` is missing (another Python), both fall back to the json package.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover (CPython has it)
    _json = None  # type: ignore[assignment]

TYPE_CHECKING = False  # typing itself is not loaded on the lean paths
if TYPE_CHECKING:
    from typing import Any


class _Settings:
    """What `_json.make_scanner` reads: json.loads' defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    def __init__(self) -> None:
        self.memo: dict[str, str] = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name)  # "NaN", "Infinity", "-Infinity"


_scan = _json.make_scanner(_Settings()) if _json is not None else None  # type: ignore[arg-type]


def loads(text: str) -> Any:
    """The value `text` holds, as json.loads gives it; ValueError when it is not JSON."""
    body = text.strip()
    if _scan is not None and body:
        try:
            value, end = _scan(body, 0)
        except Exception:
            pass
        else:
            if end == len(body):
                return value
    import json

    return json.loads(text)


def dumps(value: Any) -> str:
    """Compact JSON for `value`: None, booleans, ints, floats (NaN and infinities as
    null), strings, and lists, tuples and dicts of them (keys as strings). TypeError
    for anything else."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        finite = value == value and value not in (float("inf"), -float("inf"))
        return repr(value) if finite else "null"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_quote(str(k))}:{dumps(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _quote(text: str) -> str:
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(text)
    return str(_json.encode_basestring_ascii(text))


__all__ = ["dumps", "loads"]
