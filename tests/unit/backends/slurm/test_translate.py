"""JobSpec -> sbatch: golden files pin the scripts; metacharacters cannot escape.

Regenerate the golden files after an intended change with PODIUM_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from podium.api.caller import Caller
from podium.backends.slurm.admission import SlurmAdmission
from podium.backends.slurm.translate import sbatch_script
from podium.config.cluster import default_config
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import SubmitRequest, build_job
from podium.server.embedded_admission import EmbeddedAdmission

GOLDEN = Path(__file__).with_name("golden")
CONFIG = default_config(gpus=0, cpus=8).model_copy(update={"backend": "slurm"})
WHO = Caller(uid=1000, gid=1000, name="alice")
NOW = 1_800_000_000.0


def _script(
    options: list[str],
    script: str = "#!/bin/bash\necho hi\n",
    args: tuple[str, ...] = (),
    cwd: str = "/work",
) -> str:
    req = SubmitRequest(
        options=options,
        cwd=cwd,
        environment={"PATH": "/usr/bin"},
        script=script,
        script_args=list(args),
    )
    spec = build_job(req, CONFIG, WHO, NOW, SlurmAdmission()).spec
    return sbatch_script(spec, "/opt/podium/bin/python", "/shared/podium")


CASES = {
    "single": ["--job-name=one", "--gpus=1", "--time=1:30:00", "--mem=16G"],
    "multinode": [
        "--job-name=llama",
        "-N",
        "4",
        "--ntasks-per-node=8",
        "--gpus-per-node=h100:8",
        "--cpus-per-task=12",
        "--partition=gpu",
        "--qos=high",
        "--account=lab",
        "--auto-resume=3",
        "--requeue-exit=75,76",
        "--no-requeue-exit=2",
        "--checkpoint-dir=/fsx/ckpt/llama",
        "--exclusive",
        "--exclude=gpu-st-h100-3",
    ],
    "container": [
        "--job-name=ngc",
        "--gpus-per-node=2",
        "--nodes=2",
        "--container-image=nvcr.io#nvidia/pytorch:24.01-py3",
        "--container-mounts=/fsx:/fsx,/data:/data:ro",
    ],
    "container-pyxis-flags": [
        "--job-name=env",
        "--container-image=/fsx/images/pytorch.sqsh",
        "--container-workdir=/workspace",
        "--container-name=lab-env",
        "--container-save=/fsx/images/lab-env.sqsh",
        "--container-env=HF_HOME,WANDB_DIR",
        "--container-readonly",
        "--container-mount-home",
        "--no-container-remap-root",
        "--container-entrypoint",
    ],
    "spare-nodes": [
        "--job-name=heal",
        "-N",
        "2",
        "--ntasks-per-node=1",
        "--gpus-per-node=2",
        "--spares=1",
        "--auto-resume=2",
    ],
    "array-deps": [
        "--array=0-3,7%2",
        "--dependency=afterok:11:12",
        "--hold",
        "--nice=10",
        "--signal=B:USR1@90",
        "--output=logs/%x-%A_%a.out",
        "--comment=sweep 1",
        "--mail-type=END,FAIL",
        "--constraint=h100&efa",
    ],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    text = _script(CASES[case])
    path = GOLDEN / f"{case}.sbatch"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_golden_scripts_are_valid_bash() -> None:
    for path in GOLDEN.glob("*.sbatch"):
        done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, (path, done.stderr)


def test_engine_only_options_reach_sbatch_and_refusals_are_per_backend() -> None:
    text = _script(["--reservation=maint", "-L", "matlab:2", "--oversubscribe", "--gpu-bind=none"])
    for line in (
        "#SBATCH --reservation=maint",
        "#SBATCH --licenses=matlab:2",
        "#SBATCH --oversubscribe",
        "#SBATCH --gpu-bind=none",
    ):
        assert line in text.splitlines(), line
    with pytest.raises(SpecError, match=r"--uid cannot be honoured: sbatch runs as the submitting"):
        _script(["--uid=0"])
    with pytest.raises(SpecError, match=r"--clusters cannot be honoured: .*one Slurm cluster"):
        _script(["-M", "other"])
    with pytest.raises(Unsatisfiable, match=r"--reservation .* line break"):
        _script(["--reservation=a\n#SBATCH --uid=0"])
    embedded = default_config(gpus=0, cpus=8)
    req = SubmitRequest(options=["--reservation=maint"], cwd="/work", script="#!/bin/sh\n")
    with pytest.raises(SpecError, match="--reservation cannot be honoured: the embedded cluster"):
        build_job(req, embedded, WHO, NOW, EmbeddedAdmission())


def test_every_engine_only_option_has_the_embedded_reason() -> None:
    from podium.jobspec.options import SLURM_ONLY
    from podium.server.embedded_admission import EMBEDDED_REFUSES

    assert set(EMBEDDED_REFUSES) == set(SLURM_ONLY)


def test_refused_with_the_reason() -> None:
    with pytest.raises(Unsatisfiable, match="heartbeat"):
        _script(["--heartbeat-timeout=60"])
    with pytest.raises(SpecError, match="node range"):
        _script(["--nodes=2-4"])
    with pytest.raises(SpecError, match="needs --container-image"):
        _script(["--container-mounts=/a:/b"])
    with pytest.raises(Unsatisfiable, match="bytes"):
        _script([], script="#!/bin/bash\n" + "#" * 200_000 + "\n")
    with pytest.raises(SpecError, match="marks the members an elastic job's keeper starts"):
        _script(["--comment=podium-elastic-member:12"])  # issue 60: it hid the job


def test_embedded_cluster_takes_image_references_and_refuses_malformed_ones() -> None:
    embedded = default_config(gpus=0, cpus=8)
    req = SubmitRequest(options=["--container-image=x"], cwd="/", environment={}, wrap="true")
    assert build_job(req, embedded, WHO, NOW, EmbeddedAdmission()).spec.container_image == "x"
    bad = SubmitRequest(options=["--container-image=a#b#c"], cwd="/", environment={}, wrap="1")
    with pytest.raises(SpecError, match="is not an image reference"):
        build_job(bad, embedded, WHO, NOW, EmbeddedAdmission())


NASTY = [
    "'; touch {c}; '",
    '"; touch {c}; "',
    "$(touch {c})",
    "`touch {c}`",
    "a\\\\b",
    'x" && touch {c} #',
]


def test_metacharacters_stay_data(tmp_path: Path) -> None:
    """Run the generated script under bash with a stand-in srun that runs its command:
    every nasty name, argument and script line arrives verbatim, and nothing runs."""
    canary = tmp_path / "canary"
    nasty = [n.format(c=canary) for n in NASTY]
    user_script = (
        "#!/bin/bash\n"
        'for a in "$@"; do printf \'<%s>\\n\' "$a"; done\n'
        "echo 'PODIUM_SCRIPT_0000000000000000'\n"
        "cat <<'EOF'\n$(touch " + str(canary) + ")\nEOF\n"
    )
    text = _script(
        [f"--job-name={nasty[0]}", f"--comment={nasty[2]}", f"--output={tmp_path}/o"],
        script=user_script,
        args=tuple(nasty),
        cwd=str(tmp_path),
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    srun = bin_dir / "srun"
    srun.write_text('#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nexec "$@"\n')
    srun.chmod(0o755)
    job = tmp_path / "job.sbatch"
    state = str(tmp_path / "state")
    os.mkdir(state, 0o1777)  # the administrator's, shared by every user
    os.chmod(state, 0o1777)
    job.write_text(
        text.replace("/opt/podium/bin/python", sys.executable).replace("/shared/podium", state)
    )
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "SLURM_JOB_ID": "7",
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "0",
        "PYTHONPATH": str(Path(__file__).resolve().parents[4]),
        "TMPDIR": str(tmp_path),
    }
    done = subprocess.run(["bash", str(job)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[: len(nasty)] == [f"<{n}>" for n in nasty]
    assert "PODIUM_SCRIPT_0000000000000000" in lines
    assert f"$(touch {canary})" in lines
    assert not canary.exists()
    for n in (nasty[0], nasty[2]):  # directives: quoted for sbatch's parser, one line each
        assert n.replace("\\", "\\\\").replace('"', '\\"') in text
    with pytest.raises(SpecError):
        _script(["--job-name=two\nlines"])


def test_what_slurm_applies_itself_reaches_sbatch() -> None:
    lines = sbatch_script(
        build_job(
            SubmitRequest(
                options=["--mem=0", "--wckey=submitit", "--cpu-bind=cores", "--hint=compute_bound"],
                cwd="/",
                environment={},
                wrap="true",
            ),
            CONFIG,
            WHO,
            NOW,
            SlurmAdmission(),
        ).spec,
        "/usr/bin/python3",
        "/state",
    ).splitlines()
    for directive in ("--mem=0", "--wckey=submitit", "--cpu-bind=cores", "--hint=compute_bound"):
        assert f"#SBATCH {directive}" in lines, lines


def test_team_quotas_are_refused_on_slurm_in_one_line() -> None:
    from podium.backends.slurm.backend import SlurmBackend
    from podium.config.cluster import parse_config
    from podium.errors import ConfigError

    config = parse_config(
        "backend: slurm\nteams: [{name: t, cohort: lab, quota: {gpus: 2}, users: [amy]},\n"
        "  {name: u, cohort: lab, quota: {gpus: 2}, users: [bob]}]\n",
        "c",
    )
    with pytest.raises(ConfigError, match="GrpTRES is a fixed cap") as err:
        SlurmBackend(config)
    assert "\n" not in str(err.value)


def test_spare_nodes_hold_whole_nodes_beside_one_replica_per_node() -> None:
    """--spares=S on Slurm: N + S nodes, one task each, --no-kill (a lost node ends its
    replica's step, not the job), and the replica keeper in place of the batch step."""
    text = _script(["-N", "2", "--gpus-per-node=1", "--spares=1"])
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks=3", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --no-kill", "export PODIUM_SPARE_NODES=1"):  # fmt: skip
        assert line in text.splitlines(), line
    assert "-m podium.backends.slurm.replica_keeper" in text
    plain = _script(["-N", "2"])
    assert "--no-kill" not in plain and "replica_keeper" not in plain
    assert not [line for line in text.splitlines() if "PODIUM_STACK" in line]
    ft = _script(["-N", "2", "--gpus-per-node=1", "--spares=1", "--torchft"])
    assert "export PODIUM_STACK=torchft" in ft.splitlines()  # the keeper runs the lighthouse
    te = _script(["-N", "2", "--gpus-per-node=1", "--spares=1"],
                 script="#!/bin/bash\nexec torchrun --nnodes=2 train.py\n")  # fmt: skip
    assert "export PODIUM_STACK=torchelastic" in te.splitlines()  # it hosts the store
    for options, says in [
        (["-N", "2", "--ntasks-per-node=2", "--spares=1"], "one replica (one task) per node"),
        (["-N", "2", "--gpus=2", "--spares=1"], "--gpus-per-node"),
        (["-N", "2", "--array=1-2", "--spares=1"], "does not go with --array"),
        (["-N", "2", "--spares=65"], "0 to 64"),
        (["--elastic=2:2", "--gpus-per-task=1", "--torchft"], "instead of --elastic"),
    ]:
        with pytest.raises(SpecError, match=re.escape(says)):
            _script(options)
