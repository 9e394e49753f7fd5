"""Long options as getopt_long reads them, which every Slurm command uses (stdlib only).

A long option may be written as any unambiguous prefix of its name: `squeue --job=3`
is `--jobs=3`, `sacct --form=JobID` is `--format`, `squeue --nohead` is `--noheader`.
An exact name always wins (`--mem` beside `--mem-per-cpu`); a prefix shared by several
options that are not the same one is ambiguous, refused with getopt's own words.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not loaded on the lean path
if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable


class Ambiguous(ValueError):
    """A prefix of several different long options."""


def resolve_long(
    name: str, names: Iterable[str], same: Callable[[str], Hashable] | None = None
) -> str | None:
    """The long option `name` stands for among `names` (all written alike, e.g. with
    their dashes): itself when it is one, else the one option it is a prefix of; None
    when it is a prefix of none. `same` maps a name to what it means (aliases of one
    option are not ambiguous). Raises Ambiguous, in getopt_long's words, for a prefix
    of several different options."""
    known = list(names)
    if name in known:
        return name
    found = [n for n in known if n.startswith(name)]
    if not found:
        return None
    meanings = {same(n) if same is not None else n for n in found}
    if len(meanings) == 1:
        return min(found, key=len)
    listed = " ".join(f"'{n}'" for n in sorted(found))
    raise Ambiguous(f"option '{name}' is ambiguous; possibilities: {listed}")


__all__ = ["Ambiguous", "resolve_long"]
