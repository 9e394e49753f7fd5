"""Replace, don't restart: a replica that failed is given a spare's place while the
other replicas keep running (docs/resiliency.md). Standard library only: the
supervisor imports it at every job start.

Contract with the job (PODIUM_REPLACE_FILE, a file of the job's user in its job
directory, empty at the start):
- The job takes part by writing `ready` into the file (`podium.runtime.replace_ready`,
  or `echo ready > $PODIUM_REPLACE_FILE`). A job that never does is stopped and
  requeued on a fault as before: its survivors could not go on without a peer.
- `ready standby` also asks for a warm standby on each spare: the job's command,
  started at once on the spare's GPUs with PODIUM_STANDBY=<spare index>, which
  prepares (imports, model, device context) and waits for an event naming its spare
  ("spare": index): it then becomes the failed rank, with no cold start.
- When one replica fails (an Xid on its GPU, its process killed or crashed, its rank
  hung) and a spare is left, Podium kills what is left of that replica only, and the
  file then holds one JSON line: {"generation": G, "master_addr": A, "master_port": P,
  "world": W, "replaced": [RANK], "survivors": [...], "reason": "..."}. Every
  surviving replica gets SIGURG (its default action is to ignore it: a wake-up, no
  more). The survivors' collective with the lost peer fails by itself once its
  process is gone.
- The replacement starts as that rank, on the spare's GPUs, with the same WORLD_SIZE,
  MASTER_ADDR/MASTER_PORT of generation G, PODIUM_REPLACE_GENERATION=G and
  PODIUM_REPLACEMENT=1: it takes the model's state from a survivor (or its
  checkpoint). The survivors join generation G's rendezvous at that address.
- With no spare left, or a fault of the whole node, the job is stopped as before
  (NODE_FAIL, FAILED for a hang), and auto-resume applies.

A job on a stack with membership of its own takes part without writing anything and
has no standbys, and its survivors get no SIGURG: a TorchElastic job (a script that
runs `torchrun`; podium.run.torchelastic), whose replacement is a new agent that
TorchElastic's rendezvous brings in at the same MASTER_ADDR/MASTER_PORT, and a torchft
job (--torchft; podium.run.torchft), whose replacement is a new replica group, with a
store of its own, that the job's lighthouse takes into the next quorum.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

from podium.run.containment import descendants, kill_and_wait
from podium.run.files import read_json_safely, write_atomic
from podium.run.resize_notice import own_file, read_notice, tell

REPLACE_NOTICE = "replace"  # what the job reads (PODIUM_REPLACE_FILE), and opts in by
REPLACEMENTS_FILE = "replacements.json"  # root's record of every replacement, for the daemon
SPARE_ORDERS = "spares.json"  # the daemon's spares given since the start (a refilled pool)
SPARES_DROPPED = "spares-dropped.json"  # root's record of spares dropped for a fault on them
WAKE_SIGNAL = int(signal.SIGURG)  # ignored by default: a job not listening is not hurt


class Spares:
    """A job's spares and its replacements so far: which GPUs stand ready, whether the
    job takes part in the contract, and the notice and record it is told through."""

    def __init__(self, job_dir: Path, spares: list[list[int]], stack: str = "") -> None:
        # "torchelastic" (replicas are TorchElastic nodes), "torchft" (torchft replica
        # groups), "" (Podium's own contract, above)
        self.torchelastic = stack == "torchelastic"
        self.self_joining = stack in ("torchelastic", "torchft")  # the stack takes it in
        self.notice = job_dir / REPLACE_NOTICE
        self.record = job_dir / REPLACEMENTS_FILE
        self.ready = [(index, list(gpus)) for index, gpus in enumerate(spares)]
        self.generation = 0
        self.done: list[dict[str, Any]] = []
        self.joined = self.self_joining  # its rendezvous or lighthouse takes a new one in
        self.standby_asked = False
        self.standby: dict[int, int] = {}  # spare index -> its warm standby's pid
        self.fenced: set[int] = set()  # GPUs of replicas replaced: given up on
        self.orders = job_dir / SPARE_ORDERS
        self.orders_seen = 0
        self.next_index = len(spares)
        self.dropped_record = job_dir / SPARES_DROPPED
        self.dropped: list[int] = []  # GPUs of spares dropped for a fault (the daemon's to take)

    def create(self, creds: tuple[int, int] | None) -> None:
        """Make the notice, empty, owned by the job's user; and an empty record."""
        own_file(str(self.notice), creds)
        write_atomic(self.record, [], durable=False)

    def takes_part(self) -> bool:
        """Whether the job said it takes part (`ready`, or a generation already told)."""
        if not self.joined:
            text = read_notice(str(self.notice), 4096).strip()
            self.joined = text.startswith("ready") or self.generation > 0
            self.standby_asked = text.startswith("ready") and "standby" in text.split()
        return self.joined

    def standbys_due(self) -> list[tuple[int, list[int]]]:
        """The spares whose warm standby should start now: the job asked for them
        (`ready standby`) and they have none yet (each is started once)."""
        if not self.ready or not self.takes_part() or not self.standby_asked:
            return []
        due = [(i, gpus) for i, gpus in self.ready if i not in self.standby]
        for i, _ in due:
            self.standby[i] = 0  # asked for: not again, even if it could not start
        return due

    def standby_ended(self, pid: int) -> None:
        """A standby's process ended (before it was needed): its spare starts cold."""
        for index, known in list(self.standby.items()):
            if known == pid:
                self.standby[index] = 0

    def take_orders(self) -> None:
        """The spares the daemon gave since the last look (podium.server.spare_refill)."""
        if not self.orders.exists():
            return
        try:
            given = json.loads(self.orders.read_text())
        except (OSError, ValueError):
            return
        for order in given[self.orders_seen :]:
            for gpus in order.get("gpus") or ():
                self.ready.append((self.next_index, [int(g) for g in gpus]))
                self.next_index += 1
                # a GPU given up on and given again (a healthy one a killed or hung
                # replica left) is the job's again: a fault there is handled anew
                self.fenced.difference_update(int(g) for g in gpus)
        self.orders_seen = len(given)

    def can_replace(self) -> bool:
        """A spare is left and the job takes part."""
        return bool(self.ready) and self.takes_part()

    def drop_spare_on(self, gpu: int) -> bool:
        """A fault on a spare's GPU: that spare is gone (its standby, if any, killed
        first) and its GPUs recorded for the daemon, which takes them back and gives a
        new spare (podium.server.spare_refill). Whether `gpu` was a spare's."""
        for index, gpus in self.ready:
            if gpu in gpus:
                self.ready.remove((index, gpus))
                self._stop_standby(index)
                self.dropped.extend(gpus)
                write_atomic(self.dropped_record, self.dropped, durable=False)
                return True
        return False

    def take(self) -> tuple[int, list[int], int]:
        """The next spare (one must be left): its index, its GPUs and its warm
        standby's pid (0: none; it starts cold)."""
        index, gpus = self.ready.pop(0)
        return index, gpus, self.standby.pop(index, 0)

    def stop_standbys(self) -> None:
        """SIGKILL every standby still waiting (the job is over, or stopping)."""
        for index in list(self.standby):
            self._stop_standby(index)

    def _stop_standby(self, index: int) -> None:
        """SIGKILL spare `index`'s standby and wait until it is gone (up to 2 s)."""
        pid = self.standby.pop(index, 0)
        if pid:
            kill_and_wait({pid, *descendants(pid)})

    def announce(self, event: dict[str, Any]) -> dict[str, Any]:
        """Tell the job about the next generation (the notice, as its user reads it) and
        record it for the daemon; returns the event as told."""
        self.generation += 1
        told = {"generation": self.generation, **event}
        tell(str(self.notice), told)  # a notice the job broke: the signal still tells it
        self.done.append({**told, "time": time.time()})
        write_atomic(self.record, self.done, durable=False)
        return told


def read_replacements(job_dir: Path) -> list[dict[str, Any]]:
    """The replacements a job's supervisor recorded (empty when none, or unreadable).
    The file may be in its user's directory (a keeper's on Slurm): read as
    `read_json_safely` reads, so nothing the user put there blocks or misleads."""
    data = read_json_safely(job_dir / REPLACEMENTS_FILE)
    return [d for d in data if isinstance(d, dict)] if isinstance(data, list) else []


def read_dropped_spares(job_dir: Path) -> list[int]:
    """The GPUs of spares a job's supervisor dropped for a fault on them (empty when
    none, or unreadable), read as `read_replacements` reads."""
    data = read_json_safely(job_dir / SPARES_DROPPED)
    return [g for g in data if type(g) is int] if isinstance(data, list) else []


__all__ = [
    "REPLACEMENTS_FILE",
    "REPLACE_NOTICE",
    "SPARES_DROPPED",
    "SPARE_ORDERS",
    "WAKE_SIGNAL",
    "Spares",
    "read_dropped_spares",
    "read_replacements",
]
