"""The base of every config section: a closed pydantic model (unknown keys are errors)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Closed(BaseModel):
    """Base for config models: unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")
