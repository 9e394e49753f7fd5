"""A job that could not start (podium.run.launch_failure, podium.run.spawn.exec_failure):
its reason and exit code, and the line written into its stderr file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from podium.run.containment import ContainmentError
from podium.run.identity import Identity
from podium.run.launch_failure import LAUNCH_EXIT, failure_of, tell_user
from podium.run.spawn import SpawnError, exec_failure


def _me() -> Identity:
    return Identity(os.getuid(), os.getgid(), tuple(os.getgroups()))


def test_a_failed_system_call_exits_with_its_errno() -> None:
    failed = failure_of(FileNotFoundError(errno.ENOENT, "No such file or directory", "/x"))
    assert failed == ("launch failed: No such file or directory: /x", errno.ENOENT)
    assert failure_of(SpawnError("cannot run x: Permission denied", 13)).exit_code == 13


def test_other_failures_exit_1_with_their_words() -> None:
    failed = failure_of(ContainmentError("proctrack is cgroup but no writable cgroup v2"))
    assert failed.reason.startswith("launch failed: proctrack is cgroup")
    assert failed.exit_code == LAUNCH_EXIT == 1
    assert failure_of(SpawnError("ContainerError: mount ...")).exit_code == 1


def test_a_missing_interpreter_is_named(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/no/such/shell -e\necho\n")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", str(script))
    assert exec_failure(exc, str(script), str(tmp_path)) == (
        "cannot run the job's script: its #! line names /no/such/shell: No such file or directory"
    )
    plain = tmp_path / "prog"
    plain.write_bytes(b"\x7fELF")
    exc = PermissionError(errno.EACCES, "Permission denied", str(plain))
    assert exec_failure(exc, str(plain), "/") == f"cannot run {plain}: Permission denied"
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", "/gone")
    assert exec_failure(exc, str(plain), "/gone") == (
        "cannot enter the working directory /gone: No such file or directory"
    )


def test_the_line_is_appended_to_the_users_file(tmp_path: Path) -> None:
    err = tmp_path / "job.err"
    err.write_text("earlier\n")
    assert tell_user(str(err), "podium: error: launch failed: x", _me())
    assert err.read_text() == "earlier\npodium: error: launch failed: x\n"
    fresh = tmp_path / "fresh.err"
    assert tell_user(str(fresh), "podium: error: y", _me())
    assert fresh.read_text() == "podium: error: y\n"


def test_a_fifo_or_a_link_is_left_alone_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert not tell_user(str(fifo), "podium: error: z", _me())  # no reader: never blocks
    target = tmp_path / "target"
    target.write_text("")
    (tmp_path / "link").symlink_to(target)
    assert not tell_user(str(tmp_path / "link"), "podium: error: z", _me())
    assert target.read_text() == ""
