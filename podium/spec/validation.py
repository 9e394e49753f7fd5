"""Turn pydantic validation errors into one line with a did-you-mean hint."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from podium.spec.suggest import did_you_mean


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """Follow `loc` through nested model fields; return the model that owns the last key."""
    current: type[BaseModel] = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        inner = _first_model(field.annotation)
        if inner is None:
            return None
        current = inner
    return current


def _first_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _first_model(arg)
        if found is not None:
            return found
    return None


def one_line(exc: ValidationError, model: type[BaseModel], what: str) -> str:
    """Describe the first validation error of `exc` in one line.

    `what` names the document ("cluster config /path"). Unknown keys get the
    nearest valid key of the same mapping.
    """
    err = exc.errors()[0]
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc) or "(top level)"
    if err["type"] == "extra_forbidden":
        owner = _model_at(model, loc)
        key = str(loc[-1])
        hint = did_you_mean(key, owner.model_fields, quote=True) if owner else ""
        return f"{what}: unknown key {path!r}{hint}"
    message = err["msg"]
    return f"{what}: {path}: {message}"
