"""YAML as Podium's files mean it: times and dates stay the text the user wrote.

PyYAML follows YAML 1.1, which reads `2:00:00` as the base-60 integer 7200, `1:30` as
90, `1:30.5` as a float and `2026-12-01` as a date. Slurm reads all of these as text
(`--time=2:00:00` is two hours, `--time=1:30` one minute thirty seconds), and so must
Podium: a job file's `time: 2:00:00` became a 5-day limit (7200 minutes) before issue
44. Two loaders:

- `ConfigLoader` (the cluster config): YAML 1.1's safe loader without base-60 numbers
  and timestamps; those scalars are strings. Integers, floats, booleans and nulls are
  read as usual (`count: 4`, `preemption: false`).
- `TextLoader` (job files, whose values are sbatch's option strings): every scalar is
  the text as written; a flag reads it as true or false itself (`as_flag`).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_BASE_60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


class ConfigLoader(yaml.SafeLoader):
    """The safe loader, with base-60 numbers and dates read as strings."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        if kind is yaml.ScalarNode and implicit[0]:
            if tag == "tag:yaml.org,2002:timestamp":
                return "tag:yaml.org,2002:str"
            if tag in _NUMBER_TAGS and _BASE_60.match(value):
                return "tag:yaml.org,2002:str"
        return tag


class TextLoader(yaml.BaseLoader):
    """Every scalar as the text written (lists and mappings as such)."""


NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "yes", "on", "y"})
_FALSE = frozenset({"false", "no", "off", "n"})


def as_flag(text: str) -> bool | None:
    """A flag's value as YAML writes it (true/false, yes/no, on/off, any case); None for
    anything else."""
    lowered = text.strip().lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


def load_config_text(text: str) -> Any:
    """The cluster config's YAML (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=ConfigLoader)


def load_text(text: str) -> Any:
    """A job file's YAML, every scalar a string (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=TextLoader)


__all__ = ["NULLS", "ConfigLoader", "TextLoader", "as_flag", "load_config_text", "load_text"]
