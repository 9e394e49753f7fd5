"""Turn pydantic validation errors into one line with a did-you-mean hint."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from podium.api.suggest import did_you_mean


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
    message = str(err["msg"]).removeprefix("Value error, ")
    return f"{what}: {path}: {message}"


def unsafe_text(value: Any, where: str = "") -> str | None:
    """Where in `value` (nested dicts, lists, strings) a string holds a NUL or a lone
    surrogate, as "where: what"; None when every string is clean UTF-8 text."""
    if isinstance(value, str):
        if "\0" in value:
            return f"{where or 'value'}: contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where or 'value'}: is not valid Unicode text (a lone surrogate)"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = unsafe_text(key, f"{where}: key" if where else "key") or unsafe_text(
                item, f"{where}.{key}" if where else str(key)
            )
            if found:
                return found
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = unsafe_text(item, f"{where}[{i}]")
            if found:
                return found
    return None


class RequestModel(BaseModel):
    """Base of every API request body: unknown keys are errors, and no string may hold
    a NUL or a lone surrogate (neither can be stored, shown or passed to a process)."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _clean_text(cls, data: Any) -> Any:
        found = unsafe_text(data)
        if found:
            raise ValueError(found)
        return data
