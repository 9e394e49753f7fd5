"""Interactive allocations outside a job: `srun CMD`, `srun --pty bash` and `salloc`,
driven as a user would, through a real pseudo-terminal."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster
from tests.integration.test_permissions import PYTHONPATH, _python, as_login, other_user

pytestmark = pytest.mark.integration
__all__ = ["other_user"]  # the fixture, imported for pytest
COMPAT_BIN = Path(__file__).resolve().parents[2] / "podium" / "slurm_commands" / "bin"


def slurm_env(c: Cluster) -> dict[str, str]:
    """A login shell's environment with Podium's Slurm commands first on the PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(PODIUM_HOME=str(c.home), PODIUM_PYTHON=sys.executable, TERM="dumb")
    env["PATH"] = f"{COMPAT_BIN}:{env['PATH']}"
    return env


def test_srun_outside_a_job_is_an_allocation_and_one_step(cluster: Cluster) -> None:
    c = cluster
    env = slurm_env(c)
    echo = "echo $SLURM_JOB_ID $SLURM_STEP_ID $CUDA_VISIBLE_DEVICES"
    argv = ["srun", "-n", "2", "-G", "2", "--label", "sh", "-c", echo]
    ran = subprocess.run(argv, env=env, cwd=c.work, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    lines = sorted(ran.stdout.splitlines())
    job_id = int(lines[0].split()[1])
    job = c.job(job_id)
    gpus = ",".join(map(str, job["gpu_ids"]))
    assert lines == [f"0: {job_id} 0 {gpus}", f"1: {job_id} 0 {gpus}"]
    assert job["state"] == "COMPLETED" and job["name"] == "sh" and job["gpus"] == 2
    failed = subprocess.run(["srun", "sh", "-c", "exit 5"], env=env, cwd=c.work,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert failed.returncode == 5
    assert "srun: error: node0: task 0: Exited with exit code 5" in failed.stderr


def test_srun_waits_in_the_queue_and_ctrl_c_revokes_it(cluster: Cluster) -> None:
    c = cluster
    blocker = c.submit("--gpus=4", "--wrap", "sleep 60")
    c.wait(blocker, {"RUNNING"})
    with subprocess.Popen(["srun", "-G", "1", "true"], env=slurm_env(c), cwd=c.work,
                          stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("srun: job ") and "queued and waiting for resources" in line
        proc.send_signal(2)
        assert proc.wait(timeout=30) == 1
        rest = proc.stderr.read()
    job_id = int(line.split()[2])
    assert f"srun: Job allocation {job_id} has been revoked." in rest
    assert c.wait(job_id)["state"] == "CANCELLED"


def test_ctrl_c_once_reports_and_twice_within_a_second_interrupts(cluster: Cluster) -> None:
    c = cluster
    task = 'trap "echo got-int; exit 7" INT; echo ready; while :; do sleep 0.1; done'
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    with subprocess.Popen(["srun", "sh", "-c", task], env=slurm_env(c), cwd=c.work,
                          **pipes) as proc:  # type: ignore[call-overload]  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(2)
        assert proc.stderr.readline() == "srun: interrupt (one more within 1 sec to abort)\n"
        assert "tasks 0-0: running" in proc.stderr.readline()
        time.sleep(1.5)  # a lone Ctrl-C again: status again, the task runs on
        proc.send_signal(2)
        assert "interrupt" in proc.stderr.readline()
        proc.stderr.readline()
        proc.send_signal(2)  # the second within a second: the task gets SIGINT
        assert proc.wait(timeout=30) == 7
        assert proc.stdout.read() == "got-int\n"
        rest = proc.stderr.read()
    assert "srun: sending Ctrl-C to StepId=" in rest
    assert "srun: error: node0: task 0: Exited with exit code 7" in rest


class Terminal:
    """A command on a pseudo-terminal, read and written as a user would."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execvpe(argv[0], argv, env)
        self.seen = b""

    def expect(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen:
            assert time.monotonic() < deadline, f"never saw {text!r}: {self.seen!r}"
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.seen += os.read(self.fd, 4096)
                except OSError:
                    break
        return self.seen.decode(errors="replace")

    def _drain(self) -> None:
        while select.select([self.fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the other side is closed and read out
                return
            if not chunk:
                return
            self.seen += chunk

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def exit_code(self) -> int:
        """The program's exit code; while it runs, what it writes is read, so that a
        full pty never blocks it (a pump, not a wait: not tests/polling.py's)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with_status = os.waitpid(self.pid, os.WNOHANG)
            if with_status[0]:
                self._drain()  # what it wrote just before exiting is still in the pty
                return os.waitstatus_to_exitcode(with_status[1])
            with contextlib.suppress(OSError):
                self.seen += os.read(self.fd, 4096)
            time.sleep(0.05)
        raise AssertionError("the terminal's command never exited")


def test_srun_pty_bash_is_an_interactive_shell_in_the_job(cluster: Cluster) -> None:
    c = cluster
    term = Terminal(["srun", "--pty", "-G", "1", "bash", "--norc", "-i"], slurm_env(c), c.work)
    term.send('echo "in=$SLURM_JOB_ID/$SLURM_STEP_ID tty=$(tty)"\n')
    out = term.expect("tty=/dev/pts/")
    job_id = int(out.split("in=")[-1].split("/")[0])
    assert c.job(job_id)["state"] == "RUNNING"
    term.send("sleep 30\n")
    time.sleep(0.5)  # sleep is in the foreground by then (nothing to wait on: no prompt)
    term.send("\x03")  # Ctrl-C reaches the shell's foreground job, not srun
    term.send("echo after-ctrl-c $?\n")
    term.expect("after-ctrl-c 130")
    term.send("exit 4\n")
    assert term.exit_code() == 4
    job = c.wait(job_id)
    assert job["state"] == "FAILED" and job["exit_code"] == 4


def test_salloc_runs_a_shell_whose_srun_steps_run_in_the_allocation(cluster: Cluster) -> None:
    c = cluster
    term = Terminal(["salloc", "-n", "2", "bash", "--norc", "-i"], slurm_env(c), c.work)
    term.expect("salloc: Granted job allocation")
    term.send("srun --label hostname | sort; echo steps-$((40 + 2))\n")
    out = term.expect("steps-42\r\n")  # the shell's output, not the echo of the line
    host = os.uname().nodename
    assert f"0: {host}" in out and f"1: {host}" in out
    term.send("exit\n")
    assert term.exit_code() == 0
    assert "salloc: Relinquishing job allocation" in term.seen.decode()


def test_srun_and_salloc_work_for_a_user_who_cannot_write_dev(
    cluster: Cluster, other_user: str
) -> None:
    """Their allocation's batch output is /dev/null (issue 26, item 5: "/dev is not
    writable by you" refused every user but root)."""
    c = cluster
    env = dict(slurm_env(c), HOME="/tmp", USER=other_user, LOGNAME=other_user)
    env.update(PODIUM_PYTHON=_python[0], PYTHONPATH=PYTHONPATH)
    done = subprocess.run(
        ["srun", "-n", "2", "--label", "sh", "-c", "id -un"], env=env, cwd=c.work,
        capture_output=True, text=True, timeout=60, **as_login(other_user),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["0:", "1:", other_user, other_user]
    done = subprocess.run(
        ["salloc", "-n", "1", "srun", "true"], env=env, cwd=c.work, capture_output=True,
        text=True, timeout=60, **as_login(other_user),
    )  # fmt: skip
    assert done.returncode == 0 and "Granted job allocation" in done.stderr, done.stderr
    job = c.submit("-o", "/dev/null", "--wrap", "echo gone")
    assert c.wait(job)["state"] == "COMPLETED"
