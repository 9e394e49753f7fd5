"""`sprio`, `sshare` and `sstat` inside jobs, in Slurm 22.05's layouts (held to the real
ones by tests/integration/test_slurm_differential.py). Their numbers are Podium's own:
its priority factors and weights (docs/scheduling.md), its fair share (GPU-seconds,
decayed), and no per-step usage samples, so sstat's usage columns are blank."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from podium.slurm_commands.args import job_ids, read_options

Row = Mapping[str, Any]

# sprio: the factor columns, shown (as Slurm shows them) where their weight is not 0
_FACTORS = (("AGE", "age"), ("FAIRSHARE", "fairshare"), ("JOBSIZE", "jobsize"),
            ("PARTITION", "partition_factor"), ("QOS", "qos_factor"))  # fmt: skip
_WEIGHT_OF = {"age": "age", "fairshare": "fairshare", "jobsize": "jobsize",
              "partition_factor": "partition", "qos_factor": "qos"}  # fmt: skip
SPRIO_FLAGS = {"-h": "noheader", "--noheader": "noheader", "-l": "long", "--long": "long"}
SPRIO_FLAGS |= {"-n": "norm", "--norm": "norm", "-w": "weights", "--weights": "weights"}
SPRIO_VALUED = {"-j": "jobs", "--jobs": "jobs", "-u": "user", "--user": "user"}
SPRIO_VALUED |= {"-p": "partition", "--partition": "partition", "-o": "format"}
SPRIO_VALUED |= {"--format": "format"}


_NOT_ELIGIBLE = frozenset(
    {"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime"}
)


def eligible(job: Row) -> bool:
    """Whether sprio lists a waiting job: Slurm gives priorities to eligible jobs only
    (a held job's is 0; one waiting for a dependency or its begin time has none yet)."""
    return not job.get("held") and job.get("reason") not in _NOT_ELIGIBLE


def _weighted(job: Row, key: str) -> str:
    return f"{job[key] * (job.get('_w') or {}).get(_WEIGHT_OF[key], 0):.0f}"


# sprio -o letters -> (title, -, value), as squeue's renderer takes them
SPRIO_FIELDS: dict[str, tuple[str, tuple[str, ...], Callable[[Row], Any]]] = {
    "i": ("JOBID", (), lambda j: j["job_id"]),
    "u": ("USER", (), lambda j: j["user"]),
    "r": ("PARTITION", (), lambda j: j["partition"]),
    "Y": ("PRIORITY", (), lambda j: f"{j['priority']:.0f}"),
    "y": ("PRIORITY", (), lambda j: f"{j['priority']:.0f}"),
    "A": ("AGE", (), lambda j: _weighted(j, "age")),
    "F": ("FAIRSHARE", (), lambda j: _weighted(j, "fairshare")),
    "J": ("JOBSIZE", (), lambda j: _weighted(j, "jobsize")),
    "P": ("PARTITION", (), lambda j: _weighted(j, "partition_factor")),
    "Q": ("QOS", (), lambda j: _weighted(j, "qos_factor")),
    "N": ("NICE", (), lambda j: j["nice"]),
}


def sprio(args: list[str], fetch: Callable[[], Sequence[Row]]) -> str:
    """sprio's table of the waiting jobs' priority factors (`fetch()`: /v1/priority's
    rows, asked for once the options are read: a bad option needs no daemon)."""
    given, words = read_options(args, SPRIO_VALUED, SPRIO_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    opts = dict(given)
    jobs = fetch()
    wanted = set(job_ids(opts["jobs"])) if "jobs" in opts else set()
    users = set(opts.get("user", "").split(",")) - {""}
    shown = [j for j in jobs if eligible(j) and (not wanted or j["job_id"] in wanted)
             and (not users or j["user"] in users)
             and ("partition" not in opts or j["partition"] == opts["partition"])]  # fmt: skip
    if wanted and not shown:
        return "Unable to find jobs matching user/id(s) specified"
    if "format" in opts:
        from podium.slurm_commands.squeue import render

        weighted = [dict(j, _w=jobs[0].get("weights") or {}) for j in shown]
        return render(weighted, opts["format"], "noheader" not in opts, SPRIO_FIELDS, frozenset())
    weights = (jobs[0].get("weights") if jobs else None) or {}
    long = "long" in opts
    factors = [(title, key) for title, key in _FACTORS
               if long or weights.get(_WEIGHT_OF[key], 0)]  # fmt: skip
    head = ["          JOBID", "PARTITION"] + (["    USER"] if long or users else [])
    titles = [t for t, _ in factors]
    if long:  # Slurm's ASSOC (no associations here: 0) after AGE
        titles.insert(1, "ASSOC")
    head += ["  PRIORITY", "      SITE"] + [f"{t:>10}" for t in titles]
    if long:
        head += [f"{'NICE':>11}", f"{'TRES':>20}"]
    lines = [" ".join(head)] if "noheader" not in opts else []
    if "weights" in opts:
        line = ["        Weights", " " * 9] + ([" " * 8] if long or users else [])
        line += [" " * 10, f"{1:>10}"]
        line += [f"{weights.get(_WEIGHT_OF[k], 0):>10.0f}" for _, k in factors]
        lines.append(" ".join(line))
    for j in shown:
        row = [f"{j['job_id']:>15}", f"{j['partition']:<9}"]
        row += [f"{j['user']:>8}"] if long or users else []
        row += [f"{j['priority']:>10.0f}", f"{0:>10}"]
        for at, (_, key) in enumerate(factors):
            value = j[key] if "norm" in opts else j[key] * weights.get(_WEIGHT_OF[key], 0)
            row.append(f"{value:>10.7f}" if "norm" in opts else f"{value:>10.0f}")
            if long and at == 0:
                row.append(f"{0:>10}")  # ASSOC
        row += [f"{j['nice']:>11}", " " * 20] if long else []
        lines.append(" ".join(row))
    return "\n".join(lines)


SSHARE_FLAGS = {"-a": "all", "--all": "all", "-h": "noheader", "--noheader": "noheader"}
SSHARE_FLAGS |= {"-l": "long", "--long": "long", "-P": "parsable2", "--parsable2": "parsable2"}
SSHARE_FLAGS |= {"-p": "parsable", "--parsable": "parsable"}
SSHARE_VALUED = {"-u": "user", "--users": "user", "-A": "accounts", "--accounts": "accounts"}
SSHARE_VALUED |= {"-o": "format", "--format": "format"}


def _six(value: float) -> str:
    return f"{value:.6f}"


# field -> (header, width: negative left-justified, value of a row)
SSHARE_FIELDS: dict[str, tuple[str, int, Callable[[Row], str]]] = {
    "account": ("Account", -20, lambda r: r["_account"]),
    "user": ("User", 10, lambda r: r.get("user") or ""),
    "rawshares": ("RawShares", 10, lambda r: "" if r.get("_root") else str(r["raw_shares"])),
    "normshares": ("NormShares", 11, lambda r: _six(0.0 if r.get("_root") else r["norm_shares"])),
    "rawusage": ("RawUsage", 11, lambda r: str(int(r["raw_usage"]))),
    "normusage": ("NormUsage", 11, lambda r: "" if r.get("_root") else _six(r["effective_usage"])),
    "effectvusage": ("EffectvUsage", 13, lambda r: f"{r['effective_usage']:.6f}"),
    "fairshare": ("FairShare", 10, lambda r: "" if r.get("_root") else f"{r['fairshare']:.6f}"),
}  # fmt: skip
SSHARE_DEFAULT = "Account,User,RawShares,NormShares,RawUsage,EffectvUsage,FairShare"
SSHARE_LONG = "Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare"


def sshare(args: list[str], fetch: Callable[[], Sequence[Row]]) -> str:
    """sshare's tree of accounts and users (`fetch()`: /v1/share's rows, asked for
    once the options are read), the root account first, each level indented by a
    space, as Slurm prints it."""
    given, words = read_options(args, SSHARE_VALUED, SSHARE_FLAGS, "see docs/slurm-compat.md")
    if words:
        raise ValueError(f"unexpected argument {words[0]!r}")
    opts = dict(given)
    shares = fetch()
    spec = opts.get("format") or (SSHARE_LONG if "long" in opts else SSHARE_DEFAULT)
    columns = []
    for name in (n.strip().lower() for n in spec.split(",") if n.strip()):
        if name not in SSHARE_FIELDS:
            raise ValueError(f'Invalid field requested: "{name}"')
        columns.append(SSHARE_FIELDS[name])
    total = sum(r["raw_usage"] for r in shares if r.get("user") is None) or 0.0
    rows: list[dict[str, Any]] = [{"_account": "root", "_root": True, "raw_usage": total,
                                   "effective_usage": 1.0, "user": None}]  # fmt: skip
    for r in shares:
        depth = 1 if r["account"] == "root" or r.get("user") is None else 2
        if r["account"] == "root" and r.get("user") is None:
            continue  # the root account is the tree's root, printed first
        rows.append(dict(r, _account=" " * depth + r["account"]))
    users = set(opts.get("user", "").split(",")) - {""}
    if users:
        rows = [r for r in rows if r.get("_root") or r.get("user") in users]
    from podium.slurm_commands.sacct import _fit

    if "parsable2" in opts or "parsable" in opts:
        end = "|" if "parsable" in opts else ""
        lines = ["|".join(c[0] for c in columns) + end] if "noheader" not in opts else []
        lines += ["|".join(c[2](r) for c in columns) + end for r in rows]
        return "\n".join(lines)
    lines = []
    if "noheader" not in opts:
        lines.append("".join(_fit(c[0], c[1], cut="") + " " for c in columns))
        lines.append("".join("-" * abs(c[1]) + " " for c in columns))
    lines += ["".join(_fit(c[2](r), c[1]) + " " for c in columns) for r in rows]
    return "\n".join(lines)


SSTAT_FLAGS = {"-a": "allsteps", "--allsteps": "allsteps", "-n": "noheader"}
SSTAT_FLAGS |= {"--noheader": "noheader", "-P": "parsable2", "--parsable2": "parsable2"}
SSTAT_FLAGS |= {"-p": "parsable", "--parsable": "parsable"}
SSTAT_VALUED = {"-j": "jobs", "--jobs": "jobs", "-o": "format", "--format": "format"}
SSTAT_VALUED |= {"--fields": "format"}
_SSTAT_WIDTHS = (
    ("JobID", -12), ("MaxVMSize", 10), ("MaxVMSizeNode", 14), ("MaxVMSizeTask", 14),
    ("AveVMSize", 10), ("MaxRSS", 10), ("MaxRSSNode", 10), ("MaxRSSTask", 10), ("AveRSS", 10),
    ("MaxPages", 8), ("MaxPagesNode", 12), ("MaxPagesTask", 14), ("AvePages", 10),
    ("MinCPU", 10), ("MinCPUNode", 10), ("MinCPUTask", 10), ("AveCPU", 10), ("NTasks", 8),
    ("AveCPUFreq", 10), ("ReqCPUFreqMin", 13), ("ReqCPUFreqMax", 13), ("ReqCPUFreqGov", 13),
    ("ConsumedEnergy", 14), ("MaxDiskRead", 12), ("MaxDiskReadNode", 15),
    ("MaxDiskReadTask", 15), ("AveDiskRead", 12), ("MaxDiskWrite", 12),
    ("MaxDiskWriteNode", 16), ("MaxDiskWriteTask", 16), ("AveDiskWrite", 12),
    ("TRESUsageInAve", 14), ("TRESUsageInMax", 14), ("TRESUsageInMaxNode", 18),
    ("TRESUsageInMaxTask", 18), ("TRESUsageInMin", 14), ("TRESUsageInMinNode", 18),
    ("TRESUsageInMinTask", 18), ("TRESUsageInTot", 14), ("TRESUsageOutAve", 15),
    ("TRESUsageOutMax", 15), ("TRESUsageOutMaxNode", 19), ("TRESUsageOutMaxTask", 19),
    ("TRESUsageOutMin", 15), ("TRESUsageOutMinNode", 19), ("TRESUsageOutMinTask", 19),
    ("TRESUsageOutTot", 15),
)  # fmt: skip
SSTAT_FIELDS = {name.lower(): (name, width) for name, width in _SSTAT_WIDTHS}


def sstat(args: list[str], job_of: Callable[[int], Row | None]) -> tuple[str, list[str]]:
    """sstat's table of a running job's steps (srun steps; with -a the batch shell
    too): its JobID and NTasks; Podium samples no usage per step, so the usage
    columns are blank. `job_of(id)` is the job's record with its steps (None: no such
    job: an error line, as Slurm's). Returns the
    table and the errors for stderr ("No steps running for job N")."""
    given, words = read_options(args, SSTAT_VALUED, SSTAT_FLAGS, "see docs/slurm-compat.md")
    opts = dict(given)
    named = opts.get("jobs") or (words[0] if words else "")
    if not named:
        raise ValueError("you must specify a job id (-j)")
    spec = opts.get("format") or ",".join(n for n, _ in _SSTAT_WIDTHS)
    columns = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        if name.lower() not in SSTAT_FIELDS:
            raise ValueError(f'Invalid field requested: "{name}"')
        columns.append(SSTAT_FIELDS[name.lower()])
    lines: list[list[str]] = []
    errors: list[str] = []
    for word in named.split(","):
        base, dot, step = word.partition(".")
        (job_id,) = job_ids(base)
        job = job_of(job_id)
        if job is None:  # said, and the others shown, as Slurm's sstat (exit 0)
            errors.append(f"sstat: error: couldn't get steps for job {job_id}")
            continue
        steps = [s for s in job.get("steps") or [] if s.get("state") == "RUNNING"]
        if job["state"] != "RUNNING" or not steps:
            errors.append(f"sstat: error: No steps running for job {job_id}")
            continue
        for s in steps:
            own = str(s["step_id"])
            if (dot and own != step) or (not dot and own in ("batch", "extern")
                                         and "allsteps" not in opts):  # fmt: skip
                continue
            values = {"JobID": f"{job_id}.{own}", "NTasks": "0" if own == "batch" else
                      str(s.get("ntasks") or 0)}  # fmt: skip
            lines.append([values.get(name, "") for name, _ in columns])
    from podium.slurm_commands.sacct import _fit

    out: list[str] = []
    if "parsable2" in opts or "parsable" in opts:
        end = "|" if "parsable" in opts else ""
        if "noheader" not in opts:
            out.append("|".join(n for n, _ in columns) + end)
        out += ["|".join(r) + end for r in lines]
    else:
        if "noheader" not in opts:
            out.append("".join(_fit(n, w, cut="") + " " for n, w in columns))
            out.append("".join("-" * abs(w) + " " for _, w in columns))
        out += ["".join(_fit(v, w) + " " for v, (_, w) in zip(r, columns, strict=True))
                for r in lines]  # fmt: skip
    return "\n".join(out), errors


__all__ = ["sprio", "sshare", "sstat"]
