"""The database schema, versioned with PRAGMA user_version."""

from __future__ import annotations

SCHEMA_VERSION = 18

# A run leaves the queue's wait of its stay in `earlier_wait_seconds` (version 18) as
# it goes back to PENDING (a requeue, a resize): from its requeue, else its submission,
# to its start. One parameter: now, for a run with no start time.
ADD_STAY_WAIT = (
    "earlier_wait_seconds=earlier_wait_seconds + "
    "MAX(0.0, COALESCE(start_time, ?) - COALESCE(queued_at, submit_time))"
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id         INTEGER PRIMARY KEY AUTOINCREMENT,
    array_job_id   INTEGER,
    array_task_id  INTEGER,
    array_throttle INTEGER,
    name           TEXT NOT NULL,
    user           TEXT NOT NULL,
    uid            INTEGER NOT NULL,
    gid            INTEGER NOT NULL,
    account        TEXT NOT NULL,
    partition      TEXT NOT NULL,
    qos            TEXT NOT NULL,
    state          TEXT NOT NULL,
    reason         TEXT NOT NULL DEFAULT 'None',
    held           INTEGER NOT NULL DEFAULT 0,
    nice           INTEGER NOT NULL DEFAULT 0,
    spec           TEXT NOT NULL,
    submit_time    REAL NOT NULL,
    start_time     REAL,
    end_time       REAL,
    node           TEXT,
    gpus           INTEGER NOT NULL DEFAULT 0,
    gpu_ids        TEXT,  -- the device units held (GPUs, MIG slices, shards, MPS units)
    cpus           INTEGER NOT NULL DEFAULT 1,
    mem_mb         INTEGER NOT NULL DEFAULT 0,
    time_limit_s   INTEGER,
    exit_code      INTEGER,
    signal         INTEGER,
    restart_count  INTEGER NOT NULL DEFAULT 0,
    stdout         TEXT,
    stderr         TEXT,
    work_dir       TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_array ON jobs(array_job_id);

CREATE TABLE IF NOT EXISTS nodes (
    name        TEXT PRIMARY KEY,
    admin_state TEXT NOT NULL DEFAULT 'up',
    reason      TEXT,
    reason_uid  INTEGER,
    reason_time REAL
);

CREATE TABLE IF NOT EXISTS events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    REAL NOT NULL,
    job_id  INTEGER,
    node    TEXT,
    kind    TEXT NOT NULL,
    detail  TEXT
);
CREATE INDEX IF NOT EXISTS events_job ON events(job_id);
"""

# Version 2: fair-share usage per (account, user), decayed lazily from `updated`.
MIGRATIONS = {
    2: """
CREATE TABLE IF NOT EXISTS usage (
    account TEXT NOT NULL,
    user    TEXT NOT NULL,
    value   REAL NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (account, user)
);
""",
    # Version 3: health of nodes and GPUs (what the agent fenced and why), the faults
    # behind them, and what auto-resume needs per job.
    3: """
CREATE TABLE IF NOT EXISTS health (
    node     TEXT NOT NULL,
    gpu      INTEGER NOT NULL,           -- -1: the node itself
    label    TEXT NOT NULL DEFAULT 'schedulable',
    fenced   INTEGER NOT NULL DEFAULT 0, -- 1: the agent took it out of service
    fault    TEXT,
    reason   TEXT,
    remedy   TEXT,                       -- reset, reboot, drain, replace
    since    REAL,
    boot_id  TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    deep     TEXT,                       -- last deep check: passed or failed
    checked  REAL,                       -- when it ended
    PRIMARY KEY (node, gpu)
);
CREATE TABLE IF NOT EXISTS faults (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    time   REAL NOT NULL,
    node   TEXT NOT NULL,
    gpu    INTEGER NOT NULL,
    fault  TEXT NOT NULL,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS faults_target ON faults(node, gpu, time);
ALTER TABLE jobs ADD COLUMN exclude TEXT;
ALTER TABLE jobs ADD COLUMN checkpoint_mtime REAL;
ALTER TABLE jobs ADD COLUMN stalled_restarts INTEGER NOT NULL DEFAULT 0;
""",
    # Version 4: idempotent submissions (a retried submit returns the first one's jobs),
    # the CPU ids a running job holds, and a preemption in progress (survives a restart).
    4: """
CREATE TABLE IF NOT EXISTS submissions (
    uid     INTEGER NOT NULL,
    key     TEXT NOT NULL,
    job_ids TEXT NOT NULL,
    time    REAL NOT NULL,
    PRIMARY KEY (uid, key)
);
ALTER TABLE jobs ADD COLUMN cpu_ids TEXT;
ALTER TABLE jobs ADD COLUMN preempt_mode TEXT;
""",
    # Version 5: the spec's fields that listings and the scheduler read (JSON, without
    # the script and environment), so that neither parses whole specs; filled from the
    # spec for rows written by older versions (see Store._migrate).
    5: """
ALTER TABLE jobs ADD COLUMN brief TEXT;
""",
    # Version 6: job steps (ID.batch, ID.0, ...) of each run, as sacct shows them.
    6: """
CREATE TABLE IF NOT EXISTS steps (
    job_id     INTEGER NOT NULL,
    run        INTEGER NOT NULL,
    step_id    TEXT NOT NULL,
    name       TEXT NOT NULL,
    state      TEXT NOT NULL,
    exit_code  INTEGER,
    signal     INTEGER,
    start_time REAL,
    end_time   REAL,
    ntasks     INTEGER NOT NULL,
    node       TEXT NOT NULL,
    gpu_ids    TEXT NOT NULL,
    PRIMARY KEY (job_id, run, step_id)
);
""",
    # Version 7: a pending array is one row (Slurm's array "meta" record) holding the
    # indices of its tasks not yet given a row of their own (podium.api.arrays notation);
    # NULL on every other row. Arrays stored by older versions keep a row per task.
    7: """
ALTER TABLE jobs ADD COLUMN array_pending TEXT;
""",
    # Version 8: the most GPU memory a job's processes held at once (MiB, summed over
    # its processes and GPUs, as NVML reported it); NULL where NVML does not answer.
    8: """
ALTER TABLE jobs ADD COLUMN gpu_mem_peak_mb INTEGER;
""",
    # Version 9: `podium mig apply`: the layout an administrator asked a GPU to be split
    # in (planned, until it is applied) and the last one applied (what declared GPUs,
    # which have no hardware to keep it, are split in after a restart). Profiles joined
    # by "+"; "" is a whole GPU.
    9: """
CREATE TABLE IF NOT EXISTS mig_layouts (
    node TEXT NOT NULL,
    gpu INTEGER NOT NULL,
    planned TEXT,
    applied TEXT,
    by_user TEXT NOT NULL,
    changed REAL NOT NULL,
    PRIMARY KEY (node, gpu)
);
""",
    # Version 10: the end already given to a running job whose processes are still
    # being stopped (CANCELLED at scancel): listings show it COMPLETING and accounting
    # shows that end at once, as Slurm's do; NULL otherwise.
    10: """
ALTER TABLE jobs ADD COLUMN ending TEXT;
""",
    # Version 11: an elastic job's resizes (JSON: `podium.store.resizes`): the one under
    # way, the size its next start may take at most, and those done; NULL for others.
    11: """
ALTER TABLE jobs ADD COLUMN elastic_state TEXT;
""",
    # Version 12: the work each job lost, by cause (JSON: `podium.store.lost_work`).
    12: """
ALTER TABLE jobs ADD COLUMN lost_work TEXT;
""",
    # Version 13: the GPU-seconds of a job's runs before the current one (runs that
    # were requeued or resized), so accounting and goodput see every run.
    13: """
ALTER TABLE jobs ADD COLUMN earlier_gpu_seconds REAL NOT NULL DEFAULT 0;
""",
    # Version 14: API tokens for the HTTP listener (`podium.store.token_table`): the
    # secret's SHA-256 only, never the secret.
    14: """
CREATE TABLE IF NOT EXISTS tokens (
    token_id   TEXT PRIMARY KEY,
    digest     TEXT NOT NULL,
    user       TEXT NOT NULL,
    uid        INTEGER NOT NULL,
    gid        INTEGER NOT NULL,
    read_only  INTEGER NOT NULL,
    created    REAL NOT NULL,
    created_by TEXT NOT NULL,
    expires    REAL,
    revoked    REAL
);
""",
    # Version 15: the token a token was made with (it expires no later and is revoked
    # with it), and the dashboard's login sessions (`podium.server.http.sessions`): digests
    # of the cookie and of the page's key, never either itself.
    15: """
ALTER TABLE tokens ADD COLUMN parent TEXT;
CREATE TABLE IF NOT EXISTS sessions (
    digest     TEXT PRIMARY KEY,
    key_digest TEXT NOT NULL,
    token_id   TEXT NOT NULL,
    created    REAL NOT NULL,
    expires    REAL NOT NULL
);
""",
    # Version 16: a job requeued by auto-resume after a failure goes first
    # (`podium.sched.order`: expedited requeue).
    16: """
ALTER TABLE jobs ADD COLUMN expedite INTEGER NOT NULL DEFAULT 0;
""",
    # Version 17: when a requeued job last joined the queue (least attained service's
    # starvation guard counts its wait from then); NULL: at its submit.
    17: """
ALTER TABLE jobs ADD COLUMN queued_at REAL;
""",
    # Version 18: the seconds a job waited in the queue in its stays before the current
    # one (from submission or requeue to each start): least attained service's wait
    # guard counts a requeued job's earlier waits (`LasRules.overdue_at`).
    18: """
ALTER TABLE jobs ADD COLUMN earlier_wait_seconds REAL NOT NULL DEFAULT 0;
""",
}
