"""The YAML job file (issue 26, item 13): the names a user would try are taken, a
wrong one gets the right one suggested, and a script may be named by its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from podium.errors import SpecError
from podium.jobspec.job_file import job_file_script_path
from podium.jobspec.request import SubmitRequest, gather


def _gather(yaml_text: str) -> tuple[dict[str, str | None], str]:
    options, script, _ = gather(SubmitRequest(cwd="/tmp", yaml_text=yaml_text))
    return {k: g.value for k, g in options.values.items()}, script


def test_command_and_wrap_and_underscored_option_names() -> None:
    for key in ("command", "wrap"):
        options, script = _gather(f"job_name: train\ngpus: 2\n{key}: python train.py\n")
        assert script == "#!/bin/sh\npython train.py\n"
        assert options["job-name"] == "train" and options["gpus"] == "2"
    with pytest.raises(SpecError, match="give 'command' or 'wrap', not both"):
        _gather("command: a\nwrap: b\n")


def test_wrong_keys_say_what_is_right() -> None:
    with pytest.raises(SpecError, match=r"'job-nme': unknown key \(did you mean job-name\?\)"):
        _gather("job-nme: x\ncommand: true\n")
    with pytest.raises(SpecError, match="--wait steers podium submit itself"):
        _gather("wait: true\ncommand: true\n")
    with pytest.raises(SpecError, match="podium submit -f reads a script named by its path"):
        _gather("script: train.sh\n")  # a path the client did not read: API callers


def test_a_script_named_by_path_is_left_for_the_client(tmp_path: Path) -> None:
    named = job_file_script_path("job-name: t\nscript: train.sh\n")
    assert named is not None
    key, path, rest = named
    assert (key, path) == ("script", "train.sh") and "script" not in rest and "job-name" in rest
    assert job_file_script_path("script: |\n  #!/bin/sh\n  echo hi\n") is None  # text
    assert job_file_script_path("command: true\n") is None
