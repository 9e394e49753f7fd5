"""The command lines of the differential suite, the scenario they run against, and the
differences that are Podium's on purpose (each with its reason).

A command line is a tuple of words; `{...}` names are filled from the scenario's job
ids. Each is run on the real Slurm and on Podium's shims with the same arguments.
"""

from __future__ import annotations

# The scenario, in order (one user, the same on both sides): each job's name, its
# sbatch arguments, and the state to wait for before the next.
SCENARIO: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("longname-for-testing", ("--wrap", "sleep 900"), "RUNNING"),
    ("failer", ("--wrap", "exit 3"), "FAILED"),
    ("held", ("-H", "--wrap", "true"), "PENDING"),
    ("done", ("--wrap", "true"), "COMPLETED"),
    ("dep", ("-d", "afterok:1", "--wrap", "true"), "PENDING"),
    ("later", ("--begin=now+1hour", "--wrap", "true"), "PENDING"),
    ("arr", ("--array=0-2", "-H", "--wrap", "true"), "PENDING"),
    ("gpus", ("-G", "1", "-c", "2", "--mem=1000", "-t", "30", "--wrap", "sleep 900"), "RUNNING"),
    ("last", ("--wrap", "true"), "COMPLETED"),  # slurmdbd has the starts before it by then
)

SQUEUE_LETTERS = "aAbCDeEfFgGijKlLmMnNoPqrRStTuUVyYZ"
SQUEUE_NAMES = (
    "Account", "ArrayJobID", "ArrayTaskID", "Comment", "Dependency", "EndTime", "exit_code",
    "Feature", "GroupName", "JobArrayID", "JobID", "MinCpus", "MinMemory", "Name", "Nice",
    "NodeList", "NumCPUs", "NumNodes", "NumTasks", "Partition", "QOS", "Reason", "ReasonList",
    "RestartCnt", "SchedNodes", "StartTime", "State", "StateCompact", "STDERR", "STDOUT",
    "SubmitTime", "TimeLimit", "TimeUsed", "tres-per-node", "UserID", "UserName", "WCKey",
    "WorkDir",
)  # fmt: skip
SINFO_LETTERS = "aAcCDeEfFGlmnNPpRtT"
SACCT_FIELDS = (
    "JobID", "JobIDRaw", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode",
    "User", "UID", "Group", "NNodes", "NodeList", "Elapsed", "Timelimit", "QOS", "Reason",
    "WorkDir", "AllocTRES", "ReqCPUS", "ReqMem", "Submit", "Start", "End", "Priority",
    "Comment", "ElapsedRaw", "TimelimitRaw", "DerivedExitCode", "Restarts",
)  # fmt: skip


def _commands() -> list[tuple[str, ...]]:
    lines: list[tuple[str, ...]] = []
    # squeue: the default, each option, each % field alone, each -O field alone
    lines += [
        ("squeue",), ("squeue", "-h"), ("squeue", "--noheader"), ("squeue", "-a"),
        ("squeue", "-l"), ("squeue", "--long"), ("squeue", "-r"), ("squeue", "--array"),
        ("squeue", "-t", "all"), ("squeue", "-t", "PD"), ("squeue", "-t", "pending"),
        ("squeue", "-t", "R"), ("squeue", "--states=RUNNING,PENDING"), ("squeue", "-t", "F"),
        ("squeue", "-u", "root"), ("squeue", "--user=root"), ("squeue", "--me"),
        ("squeue", "-n", "held"), ("squeue", "--name=held,dep"), ("squeue", "-j", "{held}"),
        ("squeue", "--jobs={held},{dep}"), ("squeue", "--job={dep}"), ("squeue", "--nohead"),
        ("squeue", "-p", "debug"), ("squeue", "--partition=debug"), ("squeue", "-j", "{arr}"),
        ("squeue", "-r", "-j", "{arr}"), ("squeue", "-h", "-o", "%i"),
        ("squeue", "-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"),
        ("squeue", "--format=%i|%j|%T"), ("squeue", "-o", "%5i %-10j %.10T"),
        ("squeue", "-O", "JobArrayID,StateCompact,Reason"),
        ("squeue", "--Format=JobID:8,Name:.12,State"),
        ("squeue", "-h", "-t", "all", "-o", "%i %T %r"),
        ("squeue", "-u", "nobody"), ("squeue", "-j", "999999"),
    ]  # fmt: skip
    lines += [("squeue", "-t", "all", "-o", f"%i %{letter}") for letter in SQUEUE_LETTERS]
    lines += [("squeue", "-t", "all", "-O", f"JobID,{name}") for name in SQUEUE_NAMES]
    # sinfo
    lines += [
        ("sinfo",), ("sinfo", "-h"), ("sinfo", "-l"), ("sinfo", "-N"), ("sinfo", "-N", "-l"),
        ("sinfo", "--Node", "--long"), ("sinfo", "-a"), ("sinfo", "-p", "debug"),
        ("sinfo", "-t", "idle"), ("sinfo", "-t", "mix,alloc"), ("sinfo", "-e"),
        ("sinfo", "-a", "-o", "%P %G %l %p %c %m"), ("sinfo", "-o", "%20P %.5a %G"),
        ("sinfo", "-N", "-o", "%N %c %m %G %f"), ("sinfo", "--noheader", "-o", "%N"),
        ("sinfo", "-n", "debug-st-g-1"), ("sinfo", "--format=%P|%a|%D"),
    ]  # fmt: skip
    lines += [("sinfo", "-o", f"%{letter}") for letter in SINFO_LETTERS]
    # sacct: the default, options, each field alone, widths
    lines += [
        ("sacct",), ("sacct", "-X"), ("sacct", "--allocations"), ("sacct", "-n", "-X"),
        ("sacct", "-X", "-j", "{failer}"), ("sacct", "--job", "{failer}"),
        ("sacct", "-X", "-s", "F"), ("sacct", "-X", "--state=FAILED,COMPLETED"),
        ("sacct", "-X", "-P"), ("sacct", "-X", "-p"), ("sacct", "-X", "--parsable2"),
        ("sacct", "-X", "-u", "root"), ("sacct", "-X", "-a"), ("sacct", "-X", "--name=failer"),
        ("sacct", "-X", "-o", "JobID,JobName%5,State%6,ExitCode"),
        ("sacct", "-X", "--format=JobID%-15,State%-12"), ("sacct", "-X", "--form=JobID,State"),
        ("sacct", "-X", "-o", "jobid,state,exitcode", "-n", "-P"),
        ("sacct", "-j", "{failer}.batch"),
    ]  # fmt: skip
    lines += [("sacct", "-X", "-o", f"JobID,{field}") for field in SACCT_FIELDS]
    # the same fields, as tools ask for them: without a header, one at a time, sized
    lines += [("squeue", "-h", "-t", "all", "-o", f"%.12{letter}") for letter in SQUEUE_LETTERS]
    lines += [("squeue", "-t", "all", "-O", f"{name}:12") for name in SQUEUE_NAMES]
    lines += [("sinfo", "-N", "-h", "-o", f"%{letter}") for letter in SINFO_LETTERS]
    lines += [("sacct", "-X", "-n", "-P", "-o", field) for field in SACCT_FIELDS]
    # sprio, sshare, sstat
    lines += [
        ("sprio",), ("sprio", "-h"), ("sprio", "-l"), ("sprio", "-n"), ("sprio", "-w"),
        ("sprio", "-j", "{dep}"), ("sprio", "-u", "root"), ("sprio", "-o", "%i %u %Y"),
        ("sshare",), ("sshare", "-a"), ("sshare", "-l"), ("sshare", "-h"), ("sshare", "-P"),
        ("sshare", "-u", "root"), ("sshare", "-a", "-o", "Account,User,RawShares"),
        ("sstat", "-j", "{longname-for-testing}"), ("sstat", "-a", "-j", "{longname-for-testing}"),
        ("sstat", "-j", "{longname-for-testing}.batch", "-o", "JobID,NTasks"),
        ("sstat", "-n", "-P", "-j", "{longname-for-testing}.batch", "-o", "JobID,NTasks"),
        ("sstat", "-j", "{failer}"),
    ]  # fmt: skip
    # scontrol
    lines += [
        ("scontrol", "show", "job", "{failer}"), ("scontrol", "show", "job", "{held}"),
        ("scontrol", "show", "job", "{longname-for-testing}"), ("scontrol", "show", "node"),
        ("scontrol", "show", "node", "debug-st-g-1"), ("scontrol", "show", "partition"),
        ("scontrol", "show", "hostnames", "debug-st-g-[1-3]"),
        ("scontrol", "show", "job", "999999"),
    ]  # fmt: skip
    # errors: what each tool says, and its exit code, for what it cannot take
    lines += [
        ("squeue", "--bogus"), ("squeue", "-j"), ("squeue", "--j"), ("squeue", "-t", "bogus"),
        ("squeue", "-O", "Bogus"), ("squeue", "-j", "abc"), ("squeue", "-u", "no-such-user"),
        ("sinfo", "--bogus"), ("sinfo", "-t", "bogus"), ("sinfo", "-p", "nosuchpart"),
        ("sacct", "--bogus"), ("sacct", "-s", "bogus"), ("sacct", "-j", "abc"),
        ("sacct", "-X", "-j", "999999"), ("sprio", "--bogus"), ("sprio", "-j", "999999"),
        ("sshare", "--bogus"), ("sstat",), ("sstat", "-j", "999999"),
        ("scontrol", "show", "job", "abc"), ("scontrol", "show", "partition", "nosuchpart"),
        ("scontrol", "show", "node", "nosuchnode"), ("scontrol", "bogus"),
        ("scancel", "999999"), ("scancel", "--bogus"),
    ]  # fmt: skip
    return lines


COMMANDS = _commands()

# Differences that are Podium's on purpose, with why (a command line's key: its words
# joined by spaces, before the ids are filled in).
_YEAR = (
    "Slurm 22.05 gives a job that started without a time limit a one-year stand-in "
    "(365-00:00:00; its end a year after its start): Podium shows the UNLIMITED it has"
)
_OUTPUT = (
    "Podium resolves a job's output paths (%j, %N, ...) when it starts: while it waits "
    "they are (null), where Slurm shows the pattern filled in at submission"
)
_SHOW = (
    "scontrol show prints the fields Podium keeps, in Slurm's Key=Value layout; Slurm's "
    "others (MCS_label, Power, CPULoad, Sockets, BatchFlag, ...) have no meaning here"
)
_SHARE = (
    "usage and fair share are Podium's: GPU-seconds charged as jobs run, decayed "
    "(docs/scheduling.md), where Slurm's RawUsage waits for its next priority calculation"
)
_ONE_LINE = (
    "Podium's error is one line that says what is wrong and what would be right (the "
    "forms taken, or where they are listed); Slurm's says the first only, or takes two "
    "lines (getopt's, then 'Try --help'); the exit code is the same"
)
_ERRORS_IN_ONE_LINE = (
    "squeue --bogus", "squeue --j", "squeue -t bogus", "squeue -j abc", "sinfo --bogus",
    "sinfo -t bogus", "sacct --bogus", "sacct -s bogus", "sacct -j abc", "sprio --bogus",
    "sshare --bogus", "sstat", "scontrol show job abc", "scontrol bogus", "scancel --bogus",
)  # fmt: skip
DELIBERATE: dict[str, str] = {
    "squeue -l": _YEAR,
    "squeue --long": _YEAR,
    "squeue -t all -o %i %e": _YEAR,
    "squeue -t all -o %i %l": _YEAR,
    "squeue -t all -o %i %L": _YEAR,
    "squeue -t all -O JobID,EndTime": _YEAR,
    "squeue -t all -O JobID,TimeLimit": _YEAR,
    "squeue -h -t all -o %.12e": _YEAR,
    "squeue -h -t all -o %.12l": _YEAR,
    "squeue -h -t all -o %.12L": _YEAR,
    "squeue -t all -O EndTime:12": _YEAR,
    "squeue -t all -O TimeLimit:12": _YEAR,
    "sacct -X -o JobID,Timelimit": _YEAR,
    "sacct -X -o JobID,TimelimitRaw": _YEAR,
    "sacct -X -n -P -o Timelimit": _YEAR,
    "sacct -X -n -P -o TimelimitRaw": _YEAR,
    "squeue -t all -O JobID,STDERR": _OUTPUT,
    "squeue -t all -O JobID,STDOUT": _OUTPUT,
    "squeue -t all -O STDERR:12": _OUTPUT,
    "squeue -t all -O STDOUT:12": _OUTPUT,
    "sinfo -o %e": "FREE_MEM: Slurm reads the OS's free memory on the node; Podium the "
    "memory no job holds",
    "sinfo -N -h -o %e": "FREE_MEM: Slurm reads the OS's free memory on the node; Podium "
    "the memory no job holds",
    "sinfo -o %n": "the test Slurm's node has NodeHostname=localhost (every node of it is "
    "this machine); Podium's node is named as its host",
    "sinfo -N -h -o %n": "the test Slurm's node has NodeHostname=localhost (every node of "
    "it is this machine); Podium's node is named as its host",
    "sacct -X -o JobID,Priority": "Podium's priorities are its own numbers "
    "(docs/scheduling.md): sacct does not print them",
    "sacct -X -n -P -o Priority": "Podium's priorities are its own numbers "
    "(docs/scheduling.md): sacct does not print them",
    "sacct -X -o JobID,ElapsedRaw": "a running job's raw seconds differ by when each side "
    "ran (Elapsed, normalised, is compared)",
    "sacct -X -n -P -o ElapsedRaw": "a running job's raw seconds differ by when each side "
    "ran (Elapsed, normalised, is compared)",
    "sprio -n": "sprio -n prints Podium's normalised factors in sprio's default layout",
    "sshare": _SHARE,
    "sshare -a": _SHARE,
    "sshare -l": _SHARE + "; -l's LevelFS, GrpTRESMins and TRESRunMins are not kept",
    "sshare -h": _SHARE,
    "sshare -P": _SHARE,
    "sshare -u root": _SHARE,
    "sstat -a -j {longname-for-testing}": "Podium samples no usage per step: sstat's usage "
    "columns are blank (Slurm prints an AveCPUFreq for a batch step that has none)",
    "scontrol show job {failer}": _SHOW,
    "scontrol show job {held}": _SHOW,
    "scontrol show job {longname-for-testing}": _SHOW,
    "scontrol show node": _SHOW,
    "scontrol show node debug-st-g-1": _SHOW,
    **dict.fromkeys(_ERRORS_IN_ONE_LINE, _ONE_LINE),
    "squeue -O Bogus": "Slurm's squeue prints an empty line for each job, its error last, "
    "and exits 0 for a field it does not know; Podium refuses it first (exit 1), naming "
    "the fields it knows",
    "scancel 999999": "Slurm 22.05's scancel says nothing and exits 0 for an id that names "
    "no job; Podium keeps every job it ran, so such an id is a mistake: it says so, exit 1",
}

__all__ = ["COMMANDS", "DELIBERATE", "SACCT_FIELDS", "SCENARIO"]
