"""The table of docs/slurm-compat.md's "Held to a real Slurm" section: for each command
and each option its shim takes, whether the differential suite compares it with the
real Slurm (and how it came out), or it is taken and ignored (and why). Made from the
option tables themselves and the suite's command lines:

    python -m tests.integration.slurm_diff.table      # rewrites the section

A test checks that the section in the docs is this one."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path

from podium.slurm_commands import job_tools, sacct, sinfo, squeue, stats_tools
from tests.integration.slurm_diff.commands import COMMANDS, DELIBERATE

DOC = Path(__file__).resolve().parents[3] / "docs" / "slurm-compat.md"
BEGIN = "<!-- slurm-diff table: python -m tests.integration.slurm_diff.table -->"
END = "<!-- end of the slurm-diff table -->"

# option tables by command: (valued, flags)
TABLES: dict[str, tuple[Mapping[str, str], Mapping[str, str]]] = {
    "squeue": (squeue.VALUED, squeue.FLAGS),
    "sinfo": (sinfo.SINFO_VALUED, sinfo.SINFO_FLAGS),
    "sacct": (sacct.SACCT_VALUED, sacct.SACCT_FLAGS),
    "scancel": (job_tools.SCANCEL_OPTIONS, job_tools.SCANCEL_FLAGS),
    "sprio": (stats_tools.SPRIO_VALUED, stats_tools.SPRIO_FLAGS),
    "sshare": (stats_tools.SSHARE_VALUED, stats_tools.SSHARE_FLAGS),
    "sstat": (stats_tools.SSTAT_VALUED, stats_tools.SSTAT_FLAGS),
}
# taken and ignored, and why (a one-cluster site has nothing for them to do)
IGNORED: dict[tuple[str, str], str] = {
    ("squeue", "all"): "every partition is shown anyway (none is hidden)",
    ("sinfo", "all"): "every partition is shown anyway (none is hidden)",
    ("sinfo", "exact"): "nodes alike are grouped as they are",
    ("sinfo", "noconvert"): "memory is printed in MB already",
    ("sacct", "clusters"): "one cluster",
    ("sacct", "all_clusters"): "one cluster",
    ("sacct", "duplicates"): "a requeued job keeps one record",
    ("sacct", "noconvert"): "memory is printed in MB already",
    ("sacct", "truncate"): "times are those of the job itself",
    ("sacct", "endtime"): "every job Podium ran is kept",
    ("scancel", "quiet"): "scancel prints nothing on success anyway",
}


def _spelled(words: tuple[str, ...], option: str) -> bool:
    """Whether a command line gives `option` (as itself, --opt=V, or bundled)."""
    for word in words[1:]:
        if word == option or word.startswith(option + "="):
            return True
        if not option.startswith("--") and re.fullmatch(r"-[A-Za-z]+", word) and option[1] in word:
            return True
    return False


def _lines(count: int) -> str:
    return f"{count} command line" + ("" if count == 1 else "s")


def rows() -> list[str]:
    """The table's lines: one row per command and option (its spellings together)."""
    out = ["| command | option | Podium's answer |", "|---|---|---|"]
    for tool, (valued, flags) in TABLES.items():
        by_meaning: dict[str, list[str]] = {}
        for option, meaning in (*valued.items(), *flags.items()):
            by_meaning.setdefault(meaning, []).append(option)
        for meaning, options in by_meaning.items():
            lines = [w for w in COMMANDS if w[0] == tool and any(_spelled(w, o) for o in options)]
            differ = [w for w in lines if " ".join(w) in DELIBERATE]
            if (tool, meaning) in IGNORED:
                said = f"taken and ignored: {IGNORED[tool, meaning]}"
            elif not lines:
                said = "taken; not in the suite yet"
            elif not differ:
                said = f"as Slurm's ({_lines(len(lines))})"
            else:
                said = f"{_lines(len(lines))}, {len(differ)} differ on purpose (below)"
            shown = ", ".join(f"`{o}`" for o in sorted(options, key=len))
            out.append(f"| {tool} | {shown} | {said} |")
    out.append("| every tool | any other option | refused in one line that names it |")
    return out


def section() -> str:
    """The whole section between the markers, markers included."""
    reasons: dict[str, list[str]] = {}
    for cmd, why in DELIBERATE.items():
        reasons.setdefault(why, []).append(cmd)
    same = len(COMMANDS) - len(DELIBERATE)
    lines = [BEGIN, "", f"{len(COMMANDS)} command lines; {same} print as the real Slurm's, "
             f"{len(DELIBERATE)} differ on purpose:", ""]  # fmt: skip
    lines += rows()
    lines += ["", "The differences on purpose, by reason:", ""]
    for why, cmds in reasons.items():
        lines.append(f"- {why}: " + ", ".join(f"`{c}`" for c in cmds) + ".")
    lines += ["", END]
    return "\n".join(lines)


def main() -> int:
    """Rewrite the section in docs/slurm-compat.md; 1 when its markers are missing."""
    text = DOC.read_text()
    if BEGIN not in text:
        print(f"{DOC} has no {BEGIN!r} marker", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(head + section() + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
