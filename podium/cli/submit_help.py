"""`podium submit --help` (and -h): every option, grouped as `sbatch --help` groups
them, then Pyxis' container options, Podium's own and the client's. Each option of
podium.jobspec.options.OPTIONS has a line here (a test holds it to that)."""

from __future__ import annotations

import textwrap

from podium.jobspec.options import OPTIONS, SLURM_ONLY

# group title -> [(long name, value shown after "=", what it does)], in sbatch's order
GROUPS: dict[str, list[tuple[str, str, str]]] = {
    "Parallel run options": [
        ("array", "indexes", "job array index values (0-9, 1,3,5, 0-15:4, %N throttle)"),
        ("account", "name", "charge job to specified account"),
        ("begin", "time", "defer job until HH:MM, now+1hour, ... (sbatch's forms)"),
        ("comment", "name", "arbitrary comment"),
        ("cpus-per-task", "ncpus", "number of cpus required per task"),
        ("dependency", "type:jobid[:time]", "defer job until condition on jobid is satisfied"),
        ("kill-on-invalid-dep", "yes|no", "cancel the job if its dependency can never be met"),
        ("chdir", "directory", "set working directory for batch script"),
        ("error", "err", "file for batch script's standard error"),
        ("export", "names", "specify environment variables to export (ALL, NONE, NAME=v)"),
        ("gres", "list", "required generic resources (gpu[:type]:N, shard:N, mps:N)"),
        ("gres-flags", "opts", "flags related to GRES management"),
        ("hold", "", "submit job in held state"),
        ("input", "in", "file for batch script's standard input"),
        ("job-name", "jobname", "name of job"),
        ("mail-type", "type", "notify on state change: BEGIN, END, FAIL or ALL"),
        ("mail-user", "user", "who to send email notification for job state changes"),
        ("ntasks", "ntasks", "number of tasks to run"),
        ("nice", "value", "decrease scheduling priority by value"),
        ("no-requeue", "", "if set, do not permit the job to be requeued"),
        ("ntasks-per-node", "n", "number of tasks to invoke on each node"),
        ("nodes", "N", "number of nodes on which to run (1 on the embedded cluster)"),
        ("wait-all-nodes", "0|1", "start once all nodes are ready"),
        ("open-mode", "append|truncate", "how output and error files are opened"),
        ("output", "out", "file for batch script's standard output (%j, %x, %u, %A_%a)"),
        ("partition", "partition", "partition requested"),
        ("parsable", "", "outputs only the jobid on successful submission"),
        ("qos", "qos", "quality of service"),
        ("quiet", "", "quiet mode (suppress informational messages)"),
        ("requeue", "", "if set, permit the job to be requeued"),
        ("signal", "[[R][B]:]num[@time]", "send signal when time limit within time seconds"),
        ("test-only", "", "validate the job and say when it would start; queue nothing"),
        ("time", "minutes", "time limit (minutes, MM:SS, HH:MM:SS, D-HH)"),
        ("time-min", "minutes", "minimum time limit (if distinct)"),
        ("wait", "", "wait for completion of submitted job (exit with its code)"),
        ("wckey", "wckey", "wckey to run job under"),
        ("wrap", "command string", "wrap command string in a sh script and submit"),
    ],
    "Constraint options": [
        ("constraint", "list", "specify a list of constraints (node features)"),
        ("mem", "MB", "minimum amount of real memory (K, M, G, T suffixes)"),
        ("mincpus", "n", "minimum number of logical processors (threads) per node"),
        ("nodelist", "hosts...", "request a specific list of hosts"),
        ("exclude", "hosts...", "exclude a specific list of hosts"),
    ],
    "Consumable resources related options": [
        ("exclusive", "user", "allocate nodes in exclusive mode"),
        ("mem-per-cpu", "MB", "real memory per allocated cpu"),
    ],
    "Affinity/Multi-core options": [
        ("ntasks-per-core", "n", "number of tasks to invoke on each core"),
        ("cpu-bind", "type", "bind tasks to CPUs (as srun's --cpu-bind)"),
        ("hint", "type", "application hints: compute_bound, memory_bound, nomultithread"),
    ],
    "GPU scheduling options": [
        ("cpus-per-gpu", "n", "number of CPUs required per allocated GPU"),
        ("gpus", "n", "count of GPUs required for the job ([type:]n, 1g.10gb:1)"),
        ("gpus-per-node", "n", "number of GPUs required per allocated node"),
        ("gpus-per-task", "n", "number of GPUs required per spawned task"),
        ("mem-per-gpu", "n", "real memory required per allocated GPU"),
    ],
    "Container options (Pyxis, enroot's semantics: docs/containers.md)": [
        ("container-image", "image", "squashfs file, directory or [USER@][REGISTRY#]IMAGE[:TAG]"),
        ("container-mounts", "SRC:DST[:FLAGS],...", "bind mount into the container"),
        ("container-workdir", "path", "working directory inside the container"),
        ("container-name", "name", "keep the container under this name for later jobs"),
        ("container-save", "path", "save the container as a squashfs file when it ends"),
        ("container-env", "names", "environment variables the job's values win for"),
        ("container-writable", "", "make the container filesystem writable (default)"),
        ("container-readonly", "", "make the container filesystem read-only"),
        ("container-mount-home", "", "bind mount the user's home directory"),
        ("no-container-mount-home", "", "do not bind mount the user's home (default)"),
        ("container-remap-root", "", "become root inside the container"),
        ("no-container-remap-root", "", "keep the user's uid inside (default)"),
        ("container-entrypoint", "", "run the image's entrypoint (/etc/rc)"),
        ("no-container-entrypoint", "", "do not run the image's entrypoint (default)"),
    ],
    "Podium's own options (also #PODIUM lines and job files)": [
        ("checkpoint-dir", "path", "PODIUM_CHECKPOINT_DIR (default: one per job, kept on requeue)"),
        ("auto-resume", "N", "requeue after a hardware fault, up to N times"),
        ("requeue-exit", "codes", "requeue when the job exits with one of these codes"),
        ("no-requeue-exit", "", "forget --requeue-exit given earlier"),
        ("heartbeat-timeout", "time", "fail a job that does not touch PODIUM_HEARTBEAT_FILE"),
        ("elastic", "MIN:MAX[:STEP]", "run as MIN-MAX replicas, resized as GPUs free up"),
        ("resize-grace", "time", "an elastic job's time to save before a resize (60 s)"),
        ("resize-signal", "sig", "the signal each replica gets before a resize (USR1)"),
        ("spares", "N", "hold N replicas' GPUs idle to replace a failed replica"),
        ("torchft", "", "run a torchft lighthouse; each replica is a replica group"),
    ],
    "podium submit's own options": [
        ("file", "job.yaml", "read the options (and command or script) from a YAML job file"),
        ("json", "", "print the whole job record as JSON"),
        ("dry-run", "", "queue nothing: print what the backend would run"),
        ("batch", "FILE", "submit one job per line of FILE, atomically"),
    ],
    "Help options": [
        ("help", "", "show this help message"),
    ],
}

WIDTH = 30  # sbatch's column for the descriptions


def _line(flags: str, text: str) -> str:
    if len(flags) < WIDTH - 2:
        return f"  {flags:<{WIDTH - 2}}{text}"
    return f"  {flags} {text}"


def _flags(long: str, value: str) -> str:
    option = OPTIONS[long]
    short = f"-{option.short}, " if option.short else "    "
    if option.arg == "none":
        return f"{short}--{long}"
    if option.arg == "optional":
        return f"{short}--{long}[={value}]"
    return f"{short}--{long}={value}"


def submit_help() -> str:
    """The whole text of `podium submit --help`."""
    out = [
        "Usage: podium submit [OPTIONS...] script [args...]",
        "       podium submit [OPTIONS...] --wrap='command string'",
        "       podium submit [OPTIONS...] -f job.yaml",
        "",
        "Submit a batch job. #SBATCH and #PODIUM lines of the script are read first, then",
        "the job file, then the command line: a later value wins, as with sbatch.",
    ]
    for title, entries in GROUPS.items():
        out += ["", f"{title}:"]
        out += [_line(_flags(long, value), text) for long, value, text in entries]
    engine_only = ", ".join(f"--{name}" for name in sorted(SLURM_ONLY))
    out += ["", *textwrap.wrap(
        "sbatch options only Slurm itself honours go to sbatch on backend: slurm; the "
        f"embedded cluster refuses them with the reason when given: {engine_only}.", 88,
    )]  # fmt: skip
    out += [
        "",
        "The YAML job file takes the same options as keys (job-name: x, gpus: 2, ...) and",
        "`command:` (or `wrap:`) or `script:` (a path, or the script's text); see README.",
    ]
    return "\n".join(out) + "\n"


__all__ = ["GROUPS", "submit_help"]
