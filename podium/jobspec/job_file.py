"""A YAML job file (`podium submit -f job.yaml`): its mapping, and the script it names.

Loads PyYAML only, so the client can read a job file without the daemon's libraries.
The keys are sbatch's long option names (`job-name` or `job_name`), Podium's own
(`auto-resume`, ...), and JOB_FILE_KEYS: `command` (or `wrap`), `script` (a path the
client reads, relative to the job file, or the script's text) and `args`.

Every value is read as the text written (`podium.config.yaml_text.TextLoader`), as
sbatch reads its options: `time: 2:00:00` is two hours, not YAML 1.1's base-60 integer
7200 (which was taken as 7200 minutes before issue 44), and `begin: 2026-12-01` is the
date as written.
"""

from __future__ import annotations

from typing import Any

import yaml

from podium.config.yaml_text import load_text
from podium.errors import SpecError


def yaml_mapping(text: str) -> dict[Any, Any]:
    """The job file's top-level mapping, every scalar the text written; SpecError when
    it is not YAML or not one."""
    try:
        data = load_text(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise SpecError(f"job file: not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise SpecError("job file: expected a mapping of option names to values")
    return data


def job_file_script_path(text: str) -> tuple[str, str, str] | None:
    """(key, path, the job file without that key) when the job file's `script:` names a
    file (one line, not starting with #!) for the client to read; None otherwise."""
    data = yaml_mapping(text)
    key = next((k for k in data if str(k) == "script"), None)
    value = data.get(key) if key is not None else None
    if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
        return None
    if value.startswith("#!"):
        return None
    rest = {k: v for k, v in data.items() if k != key}
    return str(key), value.strip(), yaml.safe_dump(rest, sort_keys=False) if rest else "{}\n"


# Keys of a job file beside the options: what runs, and the script's arguments.
JOB_FILE_KEYS = {"script": "script", "command": "command", "wrap": "command", "args": "args"}


__all__ = ["JOB_FILE_KEYS", "job_file_script_path", "yaml_mapping"]
