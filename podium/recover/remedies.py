"""Running one rung of the recovery ladder: an admin's reset or reboot command, or the
re-split of a GPU drained for `podium mig apply`. Each returns the target's health
after the attempt and the event to record; the agent (podium.recover.agent) records it.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from podium.recover.ladder import MIG_APPLY_FAILED, Health, Remedy


def run_remedy(
    h: Health,
    remedy: Remedy,
    remedy_argv: Callable[[Literal["reset", "reboot"], int | None], list[str]],
    timeout_s: float,
) -> tuple[Health, str]:
    """Run the configured reset (waited for, at most `timeout_s`) or reboot (started,
    not waited for: it ends this boot) for `h`'s target; one more attempt is counted
    whatever the command did, and the event names the command and its outcome."""
    argv = remedy_argv("reset" if remedy is Remedy.RESET else "reboot", h.gpu)
    try:
        if remedy is Remedy.REBOOT:
            subprocess.Popen(argv, start_new_session=True)
            outcome = "started"
        else:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
            outcome = f"exit {proc.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        outcome = f"failed: {exc}"
    after = replace(h, attempts=h.attempts + 1)
    return after, f"{remedy.value} ({shlex.join(argv)}): {outcome}"


def run_mig_apply(h: Health, mig_apply: Callable[[int], str] | None) -> tuple[Health, str]:
    """Re-split GPU `h.gpu` with `mig_apply` (podium.server.mig_apply). On success a deep
    check returns it to service; a failure, in one line, leaves it fenced with fault
    MIG_APPLY_FAILED and says how an admin gets it back."""
    try:
        if mig_apply is None or h.gpu is None:
            raise RuntimeError("this daemon cannot re-split GPUs")
        done = mig_apply(h.gpu)
    except Exception as exc:  # the applier's reason, one line
        reason = " ".join(str(exc).split()) or type(exc).__name__
        event = (
            f"mig apply failed: {reason}: resume the GPU (podium resume --gpu {h.gpu}) "
            "or apply a layout again"
        )
        return replace(h, attempts=h.attempts + 1, fault=MIG_APPLY_FAILED, reason=event), event
    after = replace(h, attempts=h.attempts + 1)
    return after, f"mig apply: {done}; a deep check returns it to service"


__all__ = ["run_mig_apply", "run_remedy"]
