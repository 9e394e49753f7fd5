"""Small value classes for the client's lean path (standard library only, no typing)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not loaded on the client's lean path
if TYPE_CHECKING:
    from typing import Self


class Fields:
    """Equality, hashing and a repr from `__slots__`: what NamedTuple gives, without
    importing typing (which loads re) on the client's lean path. Subclasses list
    their fields in `__slots__` and set them in `__init__`; treat instances as
    values (nothing changes them after construction)."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def replace(self, **changes: object) -> Self:
        """A copy with `changes` to its fields (TypeError for a name not a field)."""
        unknown = set(changes) - set(self.__slots__)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        copy = object.__new__(type(self))
        for name in self.__slots__:
            setattr(copy, name, changes.get(name, getattr(self, name)))
        return copy

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


__all__ = ["Fields"]
