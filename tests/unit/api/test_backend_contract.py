"""The Backend contract (podium.api.backend_protocol): every registered backend keeps it,
and a backend that breaks it fails when its class is defined, naming the hook."""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from podium.api.backend_contract import (
    FEATURE_HOOKS,
    REQUIRED_HOOKS,
    ContractError,
    Feature,
    contract_breaches,
)
from podium.api.backend_protocol import Backend
from podium.backends import BACKENDS


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_registered_backend_keeps_the_contract(name: str) -> None:
    module, cls_name = BACKENDS[name]
    cls = getattr(importlib.import_module(module), cls_name)
    assert cls.name == name and contract_breaches(cls, Backend) == []
    for feature, reason in cls.CANNOT.items():  # what users read when it is refused
        assert reason[0].isalpha() and "\n" not in reason, (feature, reason)


def _hooks(*names: str) -> dict[str, Any]:
    return {n: (lambda self, *a: None) for n in names}


def test_a_missing_hook_fails_at_definition_naming_it() -> None:
    with pytest.raises(
        ContractError, match="backend 'half' does not implement _nodes: every backend must"
    ):
        type("Half", (Backend,), {"name": "half", **_hooks(*REQUIRED_HOOKS[:-3])})


def test_a_feature_is_implemented_or_declared_with_a_reason() -> None:
    everything = _hooks(*REQUIRED_HOOKS)
    cannot = {f: "it has no such thing" for f in FEATURE_HOOKS if f != Feature.TEAMS}
    with pytest.raises(ContractError, match="implement it, or declare 'team quotas' in CANNOT"):
        type("NoTeams", (Backend,), {"name": "noteams", "CANNOT": cannot, **everything})
    cannot[Feature.TEAMS] = ""
    with pytest.raises(ContractError, match="needs a one-line reason"):
        type("Blank", (Backend,), {"name": "blank", "CANNOT": cannot, **everything})
    cannot[Feature.TEAMS] = "no quotas here"
    cannot["flying"] = "no wings"
    with pytest.raises(ContractError, match="'flying', which is no Feature"):
        type("Odd", (Backend,), {"name": "odd", "CANNOT": cannot, **everything})
    del cannot["flying"]
    ok = type("Ok", (Backend,), {"name": "ok", "CANNOT": cannot, **everything})
    assert contract_breaches(ok, Backend) == []
    with pytest.raises(ContractError, match="implements _teams and declares"):
        type("Both", (Backend,), {"name": "both", "CANNOT": cannot, **everything,
                                   **_hooks("_teams")})  # fmt: skip


def test_an_unnamed_base_for_backends_is_not_checked() -> None:
    base = type("Base", (Backend,), {})
    assert base.name == ""
