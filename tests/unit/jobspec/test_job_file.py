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


def test_times_dates_and_every_value_are_read_as_written() -> None:
    """Issue 44, item 1: YAML 1.1 reads `2:00:00` as the integer 7200 (taken as 7200
    minutes: a 5-day limit) and `1:30` as 90. sbatch reads the text: 2 hours, and 1
    minute 30 seconds. So does the job file now, for every key."""
    from podium.jobspec.build import build_job
    from tests.unit.jobspec.test_build import ADMIT, ME, NOW, config

    def limit(yaml_text: str) -> int | None:
        request = SubmitRequest(cwd="/tmp", yaml_text=yaml_text + "command: true\n")
        return build_job(request, config(), ME, NOW, ADMIT).spec.time_limit_s

    assert limit("time: 2:00:00\n") == 7200
    assert limit("time: 1:30\n") == 90
    assert limit("time: 30\n") == 1800  # minutes, as sbatch's -t 30
    assert limit("time: '1-0'\n") == limit("time: 1-0\n") == 86400
    options, _ = _gather("begin: 2026-12-01\narray: 1-3\nnice: 010\ncomment: 1e3\ncommand: x\n")
    assert (options["begin"], options["array"], options["nice"], options["comment"]) == (
        "2026-12-01", "1-3", "010", "1e3")  # fmt: skip
    options, _ = _gather("hold: yes\nrequeue: off\nexclusive: true\ncommand: x\n")
    assert ("hold" in options and "no-requeue" in options) or options.get("requeue") == "no"
    with pytest.raises(SpecError, match="expected true or false, not 'maybe'"):
        _gather("hold: maybe\ncommand: x\n")
    with pytest.raises(SpecError, match=r"'time': expected one value.*not a list"):
        _gather("time: [1, 2]\ncommand: x\n")
    with pytest.raises(SpecError, match=r"'time': expected one value.*not nothing"):
        _gather("time:\ncommand: x\n")
    _, _, args = gather(SubmitRequest(cwd="/tmp", yaml_text="args: [--lr, 0.10]\ncommand: t\n"))
    assert args == ["--lr", "0.10"]  # as written, not 0.1
