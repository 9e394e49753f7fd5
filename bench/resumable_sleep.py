"""A job that does SECONDS of work (sleeping), saves what it did when told to stop,
and resumes from it when started again: what a checkpointing training job does for
least attained service (bench/sim_vs_real.py --order las).

    resumable_sleep.py SECONDS STATE_FILE PODIUM

On SIGTERM it writes the seconds done to STATE_FILE, says `PODIUM checkpoint` (the
daemon then stops it at once instead of waiting out the grace) and exits. At start it
says `PODIUM checkpoint` too, so the daemon knows it saves (only such jobs are
stopped for less attained service). STATE_FILE.log gets `began EPOCH` when its work
starts and `term EPOCH` when it is told to stop (what the bench measures a
preemption's cost by).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path


def main() -> None:
    total, state, podium = float(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    done = float(state.read_text()) if state.exists() else 0.0
    log = state.with_name(state.name + ".log")
    began = time.monotonic()
    with log.open("a") as fh:
        fh.write(f"began {time.time():.3f}\n")

    def save(signum: int, frame: object) -> None:
        with log.open("a") as fh:
            fh.write(f"term {time.time():.3f}\n")
        state.write_text(f"{done + time.monotonic() - began:.3f}")
        subprocess.run([podium, "checkpoint", "--step", "1"], capture_output=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, save)
    subprocess.run([podium, "checkpoint", "--step", "0"], capture_output=True, check=True)
    left = total - done - (time.monotonic() - began)
    while left > 0:
        time.sleep(min(left, 0.05))
        left = total - done - (time.monotonic() - began)


if __name__ == "__main__":
    main()
