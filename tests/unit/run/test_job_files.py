"""podium.run.job_files: what a task's input and output may be, opened without blocking."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from podium.run.job_files import JobFileError, TaskFiles, open_job_file, open_task_files

WRITE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def test_regular_files_and_dev_null_open_and_block_as_usual(tmp_path: Path) -> None:
    for path, flags in ((tmp_path / "out", WRITE), (Path("/dev/null"), WRITE)):
        fd = open_job_file(str(path), flags)
        try:
            assert os.get_blocking(fd) and os.write(fd, b"x") == 1
        finally:
            os.close(fd)


@pytest.mark.parametrize("flags", [WRITE, os.O_RDONLY])
def test_a_fifo_is_refused_at_once_with_or_without_a_peer(tmp_path: Path, flags: int) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    with pytest.raises(JobFileError, match=r"f is a FIFO.*regular files, a terminal"):
        open_job_file(str(fifo), flags)  # no reader: ENXIO, no writer: opens, then refused
    peer = os.open(fifo, os.O_RDWR)  # a peer on the other end changes nothing
    try:
        with pytest.raises(JobFileError, match="is a FIFO"):
            open_job_file(str(fifo), flags)
    finally:
        os.close(peer)


def test_links_directories_and_other_devices_are_refused(tmp_path: Path) -> None:
    (tmp_path / "lnk").symlink_to("/dev/null")
    with pytest.raises(JobFileError, match="lnk is a symbolic link"):
        open_job_file(str(tmp_path / "lnk"), WRITE)
    with pytest.raises(JobFileError, match="is a directory"):
        open_job_file(str(tmp_path), os.O_RDONLY)
    if os.path.exists("/dev/kmsg") and os.access("/dev/kmsg", os.R_OK):
        with pytest.raises(JobFileError, match="/dev/kmsg is a device"):
            open_job_file("/dev/kmsg", os.O_RDONLY)


def test_task_files_share_one_descriptor_when_error_goes_with_output(tmp_path: Path) -> None:
    (tmp_path / "in").write_text("data")
    fds = open_task_files(TaskFiles(str(tmp_path / "in"), str(tmp_path / "o"), None, True))
    try:
        assert fds[1] == fds[2] and os.read(fds[0], 10) == b"data"
        assert os.get_blocking(fds[0])
    finally:
        for fd in set(fds):
            os.close(fd)


def test_a_missing_output_directory_the_user_could_make_is_awaited(tmp_path: Path) -> None:
    """Issue 27, item 1: submitit makes logs/<id>/ after sbatch printed the id; the
    output opens once the directory appears. One that could not be made (its parent
    is a file) fails at once; one that never comes fails after the wait."""
    import threading
    import time

    from podium.run.job_files import open_output

    later = tmp_path / "logs" / "12"
    threading.Timer(0.3, lambda: later.mkdir(parents=True)).start()
    started = time.monotonic()
    fd = open_output(str(later / "12_0_log.out"), WRITE, wait_s=5)
    os.close(fd)
    assert 0.25 < time.monotonic() - started < 3 and (later / "12_0_log.out").exists()
    (tmp_path / "file").write_text("")
    started = time.monotonic()
    with pytest.raises(JobFileError, match=r"No such file or directory|Not a directory"):
        open_output(str(tmp_path / "file" / "sub" / "out"), WRITE, wait_s=5)
    assert time.monotonic() - started < 0.5
    with pytest.raises(JobFileError, match="No such file or directory"):
        open_output(str(tmp_path / "never" / "out"), WRITE, wait_s=0.2)
