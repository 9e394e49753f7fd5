"""The job wrapper: runs inside a Slurm batch job, before and after its tasks.

`python -m podium.backends.slurm.jobwrap start` refuses a restart the auto-resume policy does
not allow (the limit, or no progress since the last restart); `... end CODE` requeues
the job when CODE is one of its requeue exit codes, else exits with CODE. The policy
is the embedded cluster's (`podium.recover.resume.decide`). Node faults themselves are
requeued by Slurm (NODE_FAIL) or by the health hook (a `podium:` drain).

Inputs come from the environment the generated script exports: SLURM_JOB_ID,
SLURM_RESTART_COUNT, PODIUM_AUTO_RESUME, PODIUM_REQUEUE_EXIT, PODIUM_NO_REQUEUE_EXIT,
PODIUM_CHECKPOINT_DIR, PODIUM_STATE_DIR.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from podium.recover.resume import Ended, decide, newest_checkpoint
from podium.run.files import read_json, write_atomic
from podium.run.owned_dirs import Squatted, owned_dir, under


def _codes(name: str) -> tuple[int, ...]:
    return tuple(int(c) for c in os.environ.get(name, "").split(",") if c.strip())


def _base() -> Path:
    return Path(os.environ.get("PODIUM_STATE_DIR") or "/tmp")


def _user_part() -> str:
    """user-NAME: this job's user's own directory in the shared state directory. Each
    user's jobs keep their checkpoints and run records there, private (0700), so the
    state directory itself is shared like /tmp (1777) and no user's first job decides
    what the others may write; `owned_dir` checks it is theirs before any use."""
    return f"user-{os.environ.get('SLURM_JOB_USER') or os.getuid()}"


def _user_dir() -> Path:
    return _base() / _user_part()


def _state_path() -> Path:
    return _user_dir() / "slurm-jobs" / f"{os.environ.get('SLURM_JOB_ID', 'local')}.json"


def make_dirs(checkpoint: str | None) -> None:
    """This job's directories, each checked as its user's (`owned_dir`): STATE/user-NAME,
    its slurm-jobs, and the checkpoint directory when it lies in the state directory
    (one elsewhere is the user's own choice, made as asked). A missing state directory
    is made (the default, PODIUM_HOME/slurm, is the submitter's own); a shared one is
    the administrator's to make, 1777. Raises Squatted or OSError."""
    base = _base()
    base.mkdir(parents=True, exist_ok=True)
    owned_dir(base, (_user_part(), "slurm-jobs"))
    if checkpoint:
        parts = under(base, Path(checkpoint))
        if parts:
            owned_dir(base, parts)
        else:
            Path(checkpoint).mkdir(parents=True, exist_ok=True)


def _load() -> dict[str, float | int | None]:
    return read_json(_state_path()) or {}


def _save(data: dict[str, float | int | None]) -> None:
    write_atomic(_state_path(), data)  # in slurm-jobs, checked by make_dirs


def _say(message: str) -> None:
    print(f"podium: {message}", file=sys.stderr, flush=True)


def start() -> int:
    """0 when this run may go ahead; 1 (with the reason on stderr) when it may not."""
    restart = int(os.environ.get("SLURM_RESTART_COUNT") or 0)
    auto = int(os.environ.get("PODIUM_AUTO_RESUME") or 0)
    checkpoint = os.environ.get("PODIUM_CHECKPOINT_DIR")
    try:
        make_dirs(checkpoint)
    except Squatted as exc:
        _say(f"not started: {exc}")
        return 1
    except OSError as exc:
        _say(
            f"not started: cannot make {exc.filename}: {exc.strerror}; the state directory "
            f"{_base()} must exist and be writable by every user, with the sticky bit "
            "(chmod 1777, as /tmp is)"
        )
        return 1
    state = _load()
    newest = newest_checkpoint(checkpoint) if checkpoint else None
    if restart > 0 and auto > 0:
        before = state.get("checkpoint_mtime")
        verdict = decide(
            Ended(
                state="NODE_FAIL",
                exit_code=None,
                signal=None,
                fault=True,
                auto_resume=auto,
                restart_count=restart - 1,
                stalled_restarts=int(state.get("stalled_restarts") or 0),
                progressed=newest is not None and (before is None or newest > before),
            )
        )
        if not verdict.requeue:
            _say(f"not restarted: {verdict.reason}")
            return 1
        state["stalled_restarts"] = verdict.stalled_restarts
        _say(f"restart {restart} of {auto} on {os.environ.get('SLURM_JOB_NODELIST', '?')}")
    state["checkpoint_mtime"] = newest
    state["restart_count"] = restart
    _save(state)
    return 0


def end(code: int) -> int:
    """Requeue the job when `code` is a requeue exit code the policy allows; else `code`."""
    auto = int(os.environ.get("PODIUM_AUTO_RESUME") or 0)
    if code == 0 or auto <= 0:
        return code
    verdict = decide(
        Ended(
            state="FAILED",
            exit_code=code,
            signal=None,
            fault=False,
            auto_resume=auto,
            restart_count=int(os.environ.get("SLURM_RESTART_COUNT") or 0),
            requeue_exit_codes=_codes("PODIUM_REQUEUE_EXIT"),
            no_requeue_exit_codes=_codes("PODIUM_NO_REQUEUE_EXIT"),
        )
    )
    if not verdict.requeue:
        _say(f"not requeued: {verdict.reason}")
        return code
    _say(f"requeued: {verdict.reason}")
    job = os.environ["SLURM_JOB_ID"]
    if not job.isdigit():
        _say(f"not requeued: SLURM_JOB_ID {job!r} is not a job id")
        return code
    done = subprocess.run(["scontrol", "requeue", "--", job], capture_output=True, text=True)
    if done.returncode != 0:
        _say(f"scontrol requeue {job} failed: {done.stderr.strip()}")
    return code


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"]:
        return start()
    if len(argv) == 2 and argv[0] == "end" and argv[1].isdigit():
        return end(int(argv[1]))
    print("usage: python -m podium.backends.slurm.jobwrap start | end EXIT_CODE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
