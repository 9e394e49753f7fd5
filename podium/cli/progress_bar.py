"""What a long command says while it works (issue 44, item 4: `podium sim` printed
nothing for 31 minutes before it was stopped).

One helper for every long command (`podium sim`, `nccl-test`, `health --deep`, `image
import`): on a terminal, a Rich progress bar on stderr; when stderr is piped or a file,
a plain line at most every `every_s` seconds and one when each part is done, so a log
shows it worked and how long each part took. Never on stdout: tables and `--json` stay
clean. `PODIUM_PROGRESS=off` silences it; `=plain` forces the lines on a terminal.

    with Progress("podium sim") as progress:
        task = progress.task("fifo-backfill", total=8152, unit="jobs")
        ...
        task.update(done)
        task.finish()
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO, TypeVar

T = TypeVar("T")


class Task:
    """One part of the work: `update` it as it goes, `finish` it at the end."""

    def __init__(
        self, progress: Progress, label: str, total: float | None, unit: str, bar: Any
    ) -> None:
        self.progress = progress
        self.label = label
        self.total = total
        self.unit = unit
        self.bar = bar  # the Rich task id on a terminal, else None
        self.began = time.monotonic()
        self.done = 0.0
        self._said = self.began
        self.spoke = False  # a plain line about this part was printed

    def update(self, done: float, note: str = "") -> None:
        """`done` of the total so far (`note`: what it is doing now, for the line)."""
        self.done = done
        progress = self.progress
        if progress.rich is not None:
            progress.rich.update(self.bar, completed=done, description=self._title(note))
            return
        now = time.monotonic()
        if progress.plain and now - self._said >= progress.every_s:
            self._said = now
            self.spoke = True
            amount = "still working" if self.unit == "s" and not self.total else self._amount()
            progress.say(f"{self._title(note)}: {amount}, {now - self.began:.0f} s")

    def counted(self, done: float, total: float) -> None:
        """`update` in the (done, total) form that callbacks such as `simulate`'s
        `on_progress` give."""
        if total != self.total:
            self.total = total
            if self.progress.rich is not None:
                self.progress.rich.update(self.bar, total=total)
        self.update(done)

    def finish(self, note: str = "", if_spoke: bool = False) -> None:
        """The part is over; on a pipe, one line saying so and how long it took
        (with `if_spoke`, only when a line about the part was printed before)."""
        progress = self.progress
        if progress.rich is not None:
            if self.total is not None:
                progress.rich.update(self.bar, completed=self.total)
            progress.rich.update(self.bar, description=self._title(note or "done"))
            progress.rich.stop_task(self.bar)
        elif progress.plain and (self.spoke or not if_spoke):
            spent = time.monotonic() - self.began
            progress.say(f"{self._title(note or 'done')} in {spent:.0f} s")

    def _title(self, note: str) -> str:
        return f"{self.label}: {note}" if note else self.label

    def _amount(self) -> str:
        if self.total:
            share = 100 * self.done / self.total
            return f"{self.done:,.0f} of {self.total:,.0f} {self.unit} ({share:.0f} %)"
        return f"{self.done:,.0f} {self.unit}".strip()


class Progress:
    """Progress of one command on `stream` (default stderr); see the module docstring."""

    def __init__(self, command: str, stream: TextIO | None = None, every_s: float = 10.0) -> None:
        self.command = command
        self.stream = stream or sys.stderr
        self.every_s = every_s
        mode = os.environ.get("PODIUM_PROGRESS", "").strip().lower()
        tty = self.stream.isatty() and mode != "plain"
        self.plain = mode not in ("off", "0", "no") and not tty
        self.rich: Any = None
        if tty and mode not in ("off", "0", "no"):
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import (
                Progress as RichProgress,
            )

            self.rich = RichProgress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )

    def task(
        self, label: str, total: float | None = None, unit: str = "", announce: bool = True
    ) -> Task:
        """A new part of the work, shown as it starts (on a pipe, without `announce`,
        from its first periodic line: quick work then prints nothing)."""
        bar = None
        if self.rich is not None:
            bar = self.rich.add_task(label, total=total)
        task = Task(self, label, total, unit, bar)
        if self.plain and announce:
            task.spoke = True
            self.say(f"{label}: started" + (f" ({total:,.0f} {unit})" if total else ""))
        return task

    def say(self, line: str) -> None:
        """One plain line, prefixed by the command."""
        if self.rich is not None:
            self.rich.console.print(f"{self.command}: {line}", highlight=False, markup=False)
        else:
            print(f"{self.command}: {line}", file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        if self.rich is not None:
            self.rich.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self.rich is not None:
            self.rich.stop()


def while_working(command: str, label: str, work: Callable[[], T], tick_s: float = 0.2) -> T:
    """`work()` (a call that reports nothing itself: a deep health check, an image
    import) run while a task shows that it goes on and for how long; its result, or
    its exception raised here. On a pipe, work over within a line's interval prints
    nothing, and a failure no line of its own: the caller's one-line error says it."""
    got: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            got.append(work())
        except BaseException as exc:  # handed to the caller's thread as it is
            failed.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    with Progress(command) as progress:
        task = progress.task(label, unit="s", announce=False)
        worker.start()
        while worker.is_alive():
            worker.join(tick_s)
            task.update(time.monotonic() - task.began)
        if failed and progress.rich is None:
            pass  # on a pipe, the error line alone
        else:
            task.finish("failed" if failed else "done", if_spoke=True)
    if failed:
        raise failed[0]
    return got[0]


__all__ = ["Progress", "Task", "while_working"]
