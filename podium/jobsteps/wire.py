"""What `srun`/`salloc` outside a job (podium.slurm_commands.attach) and the relay inside the
job (podium.jobsteps.relay) say to each other over their Unix socket."""

from __future__ import annotations

import os
import socket

TYPE_CHECKING = False  # not `typing`'s: the relay's start-up is on every interactive path
if TYPE_CHECKING:
    from typing import Any


# The client and the relay speak in lines, without the json module (~15 ms to import
# here, on every interactive start): a header of NUL-separated fields (an argument
# cannot hold a NUL) ending in NUL and newline, then `signal N`, `winsize R,C,X,Y` and
# `exit N` lines.
HEADER = b"podium-attach-1"
# The job's batch script runs this (`-c`, not `-m`: runpy costs ~9 ms).
RELAY_MAIN = "import sys; from podium.jobsteps.relay import main; sys.exit(main(sys.argv[1:]))"


def header(args: list[str], pty: bool, step: bool, winsize: list[int]) -> bytes:
    fields = [HEADER, b"1" if pty else b"0", b"1" if step else b"0"]
    fields.append(",".join(map(str, winsize)).encode())
    return b"\0".join([*fields, *map(os.fsencode, args)]) + b"\0\n"


def read_header(data: bytes) -> tuple[list[str], bool, bool, list[int]]:
    """(args, pty, step, winsize); raises ValueError on anything else."""
    fields = data.removesuffix(b"\0\n").split(b"\0")
    if len(fields) < 4 or fields[0] != HEADER:
        raise ValueError("not a podium-attach header")
    winsize = [int(v) for v in fields[3].split(b",")]
    return [os.fsdecode(f) for f in fields[4:]], fields[1] == b"1", fields[2] == b"1", winsize


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    ((key, value),) = message.items()
    text = ",".join(map(str, value)) if isinstance(value, list) else str(int(value))
    sock.sendall(f"{key} {text}\n".encode())


def decode(line: bytes) -> dict[str, Any] | None:
    key, _, value = line.decode(errors="replace").partition(" ")
    try:
        if key == "winsize":
            return {key: [int(v) for v in value.split(",")]}
        if key in ("signal", "exit"):
            return {key: int(value)}
    except ValueError:
        pass
    return None
