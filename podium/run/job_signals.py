"""Signals a user sends to a running job (`scancel --signal`), passed from the daemon
to the job's supervisor through JOB_DIR/signals.json.

Standard library only: the supervisor imports it at every job start.

Contract:
- The daemon appends a request with `send` (under its own lock: one writer) and wakes
  the supervisor; the file is replaced atomically, so a reader sees a whole list.
- The supervisor's `Inbox.new()` gives each request once, in the order they were
  sent, however many came between two looks.
- A request's `scope` is Slurm's: "steps" (the default: every running srun step, not
  the batch shell), "batch" (`-b`: the batch shell alone) or "full" (`-f`: every
  process of the job).
"""

from __future__ import annotations

import os
from pathlib import Path

from podium.run.files import read_json, write_atomic

SIGNALS_FILE = "signals.json"
SCOPES = ("steps", "batch", "full")


def send(job_dir: Path, sig: int, scope: str) -> None:
    """Append a request for `sig` to `scope` (one of SCOPES)."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r}: expected one of {', '.join(SCOPES)}")
    path = job_dir / SIGNALS_FILE
    sent = (read_json(path) or {}).get("sent") or []
    sent.append({"signal": int(sig), "scope": scope})
    write_atomic(path, {"sent": sent}, durable=False)


class Inbox:
    """The supervisor's side: the requests not yet taken."""

    def __init__(self, job_dir: Path) -> None:
        self.path = job_dir / SIGNALS_FILE
        self.taken = 0
        self._seen = (0, 0)  # the file's (inode, mtime) at the last read: each send
        # replaces the file, so a new inode tells a new list even within a clock tick

    def new(self) -> list[tuple[int, str]]:
        """(signal, scope) of each request sent since the last call."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return []
        if (info.st_ino, info.st_mtime_ns) == self._seen:
            return []
        self._seen = (info.st_ino, info.st_mtime_ns)
        sent = (read_json(self.path) or {}).get("sent")
        if not isinstance(sent, list):
            return []
        fresh = sent[self.taken :]
        self.taken = len(sent)
        out = []
        for item in fresh:
            if isinstance(item, dict) and item.get("scope") in SCOPES:
                sig = item.get("signal")
                if isinstance(sig, int) and 0 < sig < 65:
                    out.append((sig, str(item["scope"])))
        return out
