"""The NCCL yardstick as a job on any backend: nccl-tests' *_perf where the nodes have
it, else Podium's runner on torch.distributed (podium.node.health.collective_perf).

The job is a batch script that srun starts one rank per GPU on each node (on CPUs with
`cpus_only`), submitted through the cluster's Backend like `podium submit`; its output
file holds nccl-tests' table. Used by `podium nccl-test` and `podium health --deep
--nodes`.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from podium.api.backend_protocol import Backend
from podium.api.states import TERMINAL_STATES
from podium.cli.submit import build_request
from podium.errors import SpecError
from podium.node.health.collective_perf import COLLECTIVES, parse_size

# Where nccl-tests' binaries are looked for on the nodes, after PATH.
NCCL_TESTS_DIRS = ("/opt/nccl-tests/build", "/usr/local/nccl-tests/build")


@dataclass(frozen=True)
class Yardstick:
    """One yardstick run's settings: nccl-tests' -b -e -f -n -w, and -g as GPUs (ranks)
    per node."""

    collective: str = "all_reduce"
    minbytes: str = "32M"
    maxbytes: str = "32M"
    stepfactor: int = 2
    gpus_per_node: int = 1
    cpus_only: bool = False
    iters: int = 20
    warmup: int = 5
    nccl_tests: str | None = None

    def check(self) -> None:
        """Raise SpecError, one line saying what would be right, for bad settings."""
        if self.collective not in COLLECTIVES:
            from podium.api.suggest import did_you_mean

            hint = did_you_mean(self.collective, COLLECTIVES, quote=True)
            raise SpecError(
                f"no collective {self.collective!r}{hint}: expected one of {', '.join(COLLECTIVES)}"
            )
        try:
            low, high = parse_size(self.minbytes), parse_size(self.maxbytes)
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        if low > high:
            raise SpecError(f"-b {self.minbytes} is above -e {self.maxbytes}: give -b <= -e")
        for name, value, least in (
            ("-f", self.stepfactor, 1),
            ("-g", self.gpus_per_node, 1),
            ("-n", self.iters, 1),
            ("-w", self.warmup, 0),
        ):
            if value < least:
                raise SpecError(f"{name} {value}: give a whole number >= {least}")
        if self.nccl_tests is not None and not os.path.isabs(self.nccl_tests):
            raise SpecError(f"--nccl-tests {self.nccl_tests!r}: give an absolute directory")

    def script(self, nodes: int) -> str:
        """The batch script: srun the *_perf binary when a node has it, else the runner."""
        args = [
            *("-b", self.minbytes, "-e", self.maxbytes, "-f", str(self.stepfactor), "-g", "1"),
            *("-n", str(self.iters), "-w", str(self.warmup), "-c", "1"),
        ]
        quoted = " ".join(shlex.quote(a) for a in args)
        binary = f"{self.collective}_perf"
        dirs = [self.nccl_tests] if self.nccl_tests else list(NCCL_TESTS_DIRS)
        in_path = "" if self.nccl_tests else f"$(command -v {binary} || true)"
        runner = f"{shlex.quote(sys.executable)} -m podium.node.health.collective_perf"
        ranks = f"{nodes} node(s) x {self.gpus_per_node} rank(s)"
        return (
            "#!/bin/bash\n"
            f"# podium nccl-test: {self.collective} on {ranks}\n"
            "set -u\n"
            f"bin={in_path}\n"
            f"for dir in {' '.join(shlex.quote(d) for d in dirs)}; do\n"
            f'    if [ -z "$bin" ] && [ -x "$dir/{binary}" ]; then bin=$dir/{binary}; fi\n'
            "done\n"
            'if [ -n "$bin" ]; then\n'
            '    echo "# podium nccl-test: nccl-tests\' $bin"\n'
            f'    exec srun "$bin" {quoted}\n'
            "fi\n"
            f'echo "# podium nccl-test: Podium\'s runner on torch.distributed"\n'
            f"exec srun {runner} {self.collective} {quoted}\n"
        )

    def request(
        self,
        nodes: int,
        output: str,
        job_name: str,
        time_limit: str,
        nodelist: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The submit request of one run on `nodes` nodes (these ones, when named)."""
        ranks = str(self.gpus_per_node)
        options = [
            *("--nodes", str(nodes), "--ntasks-per-node", ranks),
            *("--job-name", job_name, "--output", output, "--time", time_limit),
        ]
        if not self.cpus_only:
            options += ["--gpus-per-node", ranks]
        if nodes > 1:  # other jobs' traffic would be measured too
            options.append("--exclusive")
        if nodelist:
            options += ["--nodelist", ",".join(nodelist)]
        request, _ = build_request(options, stdin_script=self.script(nodes))
        return request


@dataclass
class Ended:
    """A yardstick job once it ended: its record and its output (None: unreadable)."""

    job_id: int
    record: dict[str, Any]
    output: str | None
    output_path: str


def submit(backend: Backend, request: dict[str, Any]) -> int:
    """Submit one run; its job id. Backend errors propagate (one line each)."""
    record = backend.submit(request)[0]
    for warning in backend.warnings:
        print(f"podium: warning: {warning}", file=sys.stderr)
    return int(record["job_id"])


def wait(
    backend: Backend,
    job_ids: Sequence[int],
    pattern: str,
    cwd: str,
    on_state: Callable[[dict[str, Any]], None] | None = None,
) -> list[Ended]:
    """Wait for every job to end; each one's record and output text. The output path is
    the record's while the job is known to the scheduler, else `pattern` with %j and
    %x filled in, under `cwd` when relative. `on_state` is told each record read while
    it waits (what a long wait shows)."""
    seen: dict[int, str] = {}
    ended: list[Ended] = []
    for job_id in job_ids:
        while True:
            record = backend.job(job_id)
            if record.get("stdout"):
                seen[job_id] = str(record["stdout"])
            if on_state is not None:
                on_state(record)
            if record["state"] in TERMINAL_STATES:
                break
            time.sleep(0.5)
        path = seen.get(job_id) or os.path.join(
            cwd, pattern.replace("%j", str(job_id)).replace("%x", str(record.get("name") or ""))
        )
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text: str | None = fh.read()
        except OSError:
            text = None
        ended.append(Ended(job_id, record, text, path))
    return ended


def outcome(ended: Ended) -> str:
    """One line for a job that did not complete: its state, exit code and what it said
    of why (its own error line, when its output has one)."""
    record = ended.record
    code = record.get("exit_code")
    line = f"job {ended.job_id} ended {record['state']}" + (
        f" (exit {code})" if code is not None else ""
    )
    why = error_line(ended.output or "")
    return f"{line}: it said: {why}" if why else line


def error_line(output: str) -> str | None:
    """The line of a failed job's output that says why: a traceback's last line (the
    exception), else the last line that names an error (the program's own before srun's
    "task 0: Exited with exit code 2"), else None. Control characters are dropped."""
    from podium.api.text import printable

    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        raised = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", ln)]
        if raised:
            return printable(raised[-1])[:300]
    said = [ln for ln in lines if re.search(r"\b(error|cannot|not installed|not found|failed)\b",
                                            ln, re.I)]  # fmt: skip
    own = [ln for ln in said if not ln.startswith(("srun: ", "slurmstepd: "))]  # not the launcher's
    return printable((own or said)[-1])[:300] if said else None


def host_names(option: str, expr: str) -> list[str]:
    """The nodes a Slurm host list names, checked to be plain host names."""
    from podium.api.hostlist import hostlist

    try:
        names = hostlist(expr)
    except ValueError as exc:
        raise click.UsageError(f"{option} {expr!r}: {exc}") from None
    bad = [n for n in names if not n or not all(c.isalnum() or c in "-_." for c in n)]
    if bad or not names:
        raise click.UsageError(
            f"{option} {expr!r}: not a host list; give names like node[1-4] or gpu1,gpu2"
        )
    return list(dict.fromkeys(names))
