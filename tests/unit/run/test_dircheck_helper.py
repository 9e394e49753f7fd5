"""The long-lived directory-check helper gives the same findings as the /bin/sh check,
for the same arguments; a helper that died is replaced; with no helper the shell
answers. (As a second Unix user: tests/integration/test_permissions.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from podium.run.dircheck_helper import DirCheckers, HelperUnavailable
from podium.run.identity import DirCheckError, Identity, check_dirs_as_user

ME = Identity(os.getuid(), os.getgid(), tuple(os.getgroups()))


def _cases(tmp: Path) -> list[dict[str, list[str]]]:
    (tmp / "dir").mkdir()
    (tmp / "file").write_text("x")
    os.mkfifo(tmp / "fifo")
    (tmp / "link").symlink_to(tmp / "file")
    return [
        {"enter": [str(tmp / "dir")]},
        {"enter": [str(tmp / "nothing")]},
        {"write": [str(tmp / "dir")]},
        {"read": [str(tmp / "file")]},
        {"read": [str(tmp / "absent")]},
        {"outputs": [str(tmp / "dir" / "new.out")]},
        {"outputs": [str(tmp / "fifo")]},
        {"outputs": [str(tmp / "link")]},
        {"outputs": [str(tmp / "missing-dir" / "x.out")]},
        {"inputs": [str(tmp / "file")]},
        {"inputs": [str(tmp / "absent")]},
        {"inputs": [str(tmp / "dir")]},
    ]


def _answer(**kw: object) -> str:
    try:
        check_dirs_as_user(ME, **kw)  # type: ignore[arg-type]
    except DirCheckError as exc:
        return str(exc)
    return "ok"


def test_the_helper_finds_what_the_shell_finds(tmp_path: Path) -> None:
    checkers = DirCheckers()
    if not checkers.python:
        pytest.skip("no system Python for the helper")
    try:
        answers = []
        for case in _cases(tmp_path):
            shell = _answer(**case)
            helper = _answer(**case, ask=checkers.ask)
            assert helper == shell, case
            answers.append(shell)
        assert answers.count("ok") == 5 and any("FIFO" in a for a in answers)
        assert any("symbolic link" in a for a in answers)
        (only,) = checkers._helpers.values()  # one helper for all of them
        only.proc.kill()  # it dies: the next check starts another
        only.proc.wait()
        assert _answer(enter=[str(tmp_path / "dir")], ask=checkers.ask) == "ok"
        assert next(iter(checkers._helpers.values())) is not only
    finally:
        checkers.close()


def test_without_a_helper_the_shell_answers(tmp_path: Path) -> None:
    checkers = DirCheckers(python="")
    with pytest.raises(HelperUnavailable):
        checkers.ask(ME, ["d:/"])
    assert _answer(enter=[str(tmp_path / "nothing")], ask=checkers.ask).endswith(
        "is not a directory you can see"
    )
