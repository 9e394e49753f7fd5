"""The embedded cluster's admission: its node, partitions, QoS, accounts and mail."""

from __future__ import annotations

import pytest

from podium.api.caller import Caller
from podium.config.cluster import ClusterConfig, GpuInventory
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import SubmitRequest, build_job
from podium.jobspec.job import JobSpec
from podium.server.embedded_admission import EmbeddedAdmission
from tests.unit.jobspec.test_build import ME, NOW, build, config


def test_defaults_come_from_cluster_and_partition() -> None:
    spec = build()
    assert (spec.partition, spec.qos, spec.account) == ("main", "normal", "alice")
    assert spec.time_limit_s == 3600 and spec.ntasks == 1 and spec.cpus == 1
    assert spec.mem_mb == 4000  # memory per CPU = node memory / node CPUs
    assert spec.output == "slurm-%j.out" and spec.requeue is True


@pytest.mark.parametrize(
    "options,message",
    [
        (["-G", "5"], "asks for 5 GPUs but node n0 has 4"),
        (["--nodes=2"], "has 1 node"),
        (["-n", "4", "--ntasks-per-node=2"], "needs 2 nodes"),
        (["-p", "short", "-t", "11"], "exceeds partition short's max time 10"),
        (["-p", "short", "-t", "UNLIMITED"], "exceeds partition short"),
        (["--nodelist=n1"], "the only node is 'n0'"),
    ],
)
def test_never_fits(options: list[str], message: str) -> None:
    with pytest.raises(Unsatisfiable, match=message):
        build(options=options)


def test_features_and_the_only_node() -> None:
    with pytest.raises(SpecError, match="only features joined with '&'"):
        build(options=["--constraint=a|b"])
    with pytest.raises(Unsatisfiable, match="lacks feature"):
        build(options=["--constraint=fast"])
    with pytest.raises(Unsatisfiable, match="excludes the only node 'n0'"):
        build(options=["--exclude=n0"])
    spec = build(options=["--nodelist=n0", "--exclude=n9"])
    assert spec.nodelist == () and spec.exclude == ()


def test_mail_needs_a_transport_and_container_images_are_files_or_references() -> None:
    req = SubmitRequest(script="#!/bin/sh\n", options=["--mail-type=END"], cwd="/tmp")
    built = build_job(req, config(), ME, NOW, EmbeddedAdmission())
    assert built.spec.mail_types == ("END",)  # accepted, recorded, and the user is told
    assert built.warnings == (
        "command line: --mail-type: this cluster has no mail transport, so its mail events "
        "are recorded (podium events), not sent",
    )
    pulled = build(options=["--container-image=nvcr.io#nvidia/pytorch:24.01-py3"])
    assert pulled.container_image == "nvcr.io#nvidia/pytorch:24.01-py3"  # pulled at start
    with pytest.raises(SpecError, match=r"--container-image: .* lower-case IMAGE"):
        build(options=["--container-image=nvcr.io#Nvidia/PyTorch"])
    spec = build(
        options=[
            "--container-image=./env.sqsh",
            "--container-mounts=/data,/scratch:/s:ro+rprivate",
            "--container-readonly",
            "--container-writable",  # the last of the pair wins, as sbatch reads options
            "--no-container-mount-home",
            "--container-env=HF_HOME,WANDB_DIR",
        ]
    )
    assert spec.container_mounts == ("/data:/data", "/scratch:/s:ro+rprivate")
    assert (spec.container_writable, spec.container_mount_home) == (True, False)
    assert spec.container_remap_root is None and spec.container_env == ("HF_HOME", "WANDB_DIR")


def acl_config() -> ClusterConfig:
    return ClusterConfig.model_validate(
        {
            **config().model_dump(),
            "qos": [
                {"name": "high", "priority": 1000, "allow_users": ["lead"], "allow_groups": ["pi"]},
                {"name": "normal", "priority": 100},
                {"name": "low", "priority": 10},
            ],
            "accounts": [
                {"name": "vision", "users": [{"name": "alice"}], "allow_qos": ["normal", "low"]},
                {"name": "nlp", "allow_groups": ["nlp"]},
            ],
            "users": [{"name": "alice", "default_account": "vision"}],
        }
    )


def test_qos_and_accounts_are_open_only_to_their_members() -> None:
    cfg = acl_config()

    def submit(who: Caller, *options: str) -> JobSpec:
        return build_job(
            SubmitRequest(script="#!/bin/sh\n", options=list(options), cwd="/tmp"),
            cfg,
            who,
            NOW,
            EmbeddedAdmission(),
        ).spec

    alice = Caller(1000, 1000, "alice", groups=("alice",))
    assert submit(alice).account == "vision"  # her default account
    with pytest.raises(SpecError, match="may not use QoS 'high'"):
        submit(alice, "-q", "high")
    with pytest.raises(SpecError, match="may not charge account 'nlp'"):
        submit(alice, "--account=nlp")
    with pytest.raises(SpecError, match="allows only QoS normal, low"):
        submit(Caller(1000, 1000, "alice", groups=("pi",)), "-q", "high")
    assert submit(Caller(1001, 1001, "lead"), "-q", "high").qos == "high"
    carol = Caller(1002, 1002, "carol", groups=("carol", "pi", "nlp"))
    assert submit(carol, "-q", "high", "--account=nlp").account == "nlp"
    root = Caller(0, 0, "root", is_admin=True)
    assert submit(root, "-q", "high", "--account=nlp").qos == "high"
    access = cfg.access("alice", ("alice",))
    assert access["accounts"] == ["vision"] and access["default_account"] == "vision"
    assert access["qos"] == ["normal", "low"]
    assert access["account_qos"] == {"vision": ["normal", "low"]}


def test_a_teams_account_is_its_members_only() -> None:
    """Issue 43: with the documented team (`accounts: [nlp]`, no users) and no account
    list, any user could charge nlp and reclaim its quota from other users' jobs. A
    team's account now counts only for the team's users, or for those the account's
    entry names; an entry naming nobody opens it to nobody else."""
    base = config().model_dump()
    teams = [
        {"name": "nlp", "cohort": "lab", "quota": {"gpus": 2}, "accounts": ["nlp"]},
        {"name": "vision", "cohort": "lab", "quota": {"gpus": 2}, "users": ["amy"],
         "accounts": ["vis"]},
    ]  # fmt: skip

    def submit(cfg: ClusterConfig, who: Caller, *options: str) -> JobSpec:
        request = SubmitRequest(script="#!/bin/sh\n", options=list(options), cwd="/tmp")
        return build_job(request, cfg, who, NOW, EmbeddedAdmission()).spec

    cfg = ClusterConfig.model_validate(dict(base, teams=teams))
    mallory = Caller(1003, 1003, "mallory", groups=("mallory",))
    with pytest.raises(SpecError, match="account 'nlp' is team nlp's and user mallory is not"):
        submit(cfg, mallory, "--account=nlp")
    with pytest.raises(SpecError, match="team vision's"):
        submit(cfg, mallory, "-A", "vis")
    assert submit(cfg, Caller(1004, 1004, "amy"), "-A", "vis").account == "vis"
    assert submit(cfg, mallory).account == "mallory"  # an account of no team: as before
    root = Caller(0, 0, "root", is_admin=True)
    assert submit(cfg, root, "--account=nlp").account == "nlp"
    named = dict(base, teams=teams, accounts=[
        {"name": "nlp", "users": [{"name": "bob"}], "allow_groups": ["nlp-lab"]},
        {"name": "vis"}, {"name": "mallory"},
    ])  # fmt: skip
    cfg = ClusterConfig.model_validate(named)
    assert submit(cfg, Caller(1005, 1005, "bob"), "--account=nlp").account == "nlp"
    assert submit(cfg, Caller(1006, 1006, "eve", groups=("nlp-lab",)), "-A", "nlp")
    with pytest.raises(SpecError, match="may not charge account 'nlp'"):
        submit(cfg, mallory, "--account=nlp")
    with pytest.raises(SpecError, match="team vision's"):  # an open entry opens no team
        submit(cfg, mallory, "--account=vis")


def test_what_slurm_accepts_is_accepted() -> None:
    spec = build(options=["--mem=0"])
    assert spec.mem_mb == 64000 and spec.mem_request == ("mem", 0)  # all of the node's
    binding = ["--cpu-bind=cores", "--hint=nomultithread", "--gres-flags=enforce-binding"]
    spec = build(options=["--wckey=submitit", *binding, "-n", "2", "--ntasks-per-core=1"])
    assert spec.wckey == "submitit"
    assert spec.binding == (
        ("ntasks-per-core", "1"),
        ("cpu-bind", "cores"),
        ("hint", "nomultithread"),
        ("gres-flags", "enforce-binding"),
    )
    with pytest.raises(SpecError, match="expected a workload key"):
        build(options=["--wckey=a b"])


def on_mig(options: list[str]) -> JobSpec:
    """A job built for two H100s, GPU 0 split as 3g.40gb + 2g.20gb + 2 x 1g.10gb."""
    c = config()
    c.node.gpus = GpuInventory(
        source="declared",
        count=2,
        type="h100",
        memory_mb=81920,
        mig={0: ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
    )
    req = SubmitRequest(script="#!/bin/sh\ntrue\n", options=options, cwd="/tmp")
    return build_job(req, c, ME, NOW, EmbeddedAdmission()).spec


@pytest.mark.parametrize(
    "options,gpus,gpu_type",
    [
        (["--gres=gpu:1g.10gb:2", "-n", "2"], 2, "1g.10gb"),  # one task per slice
        (["--gpus-per-task=1g.10gb:1", "-n", "2"], 2, "1g.10gb"),
        (["--gpus=3g.40gb:1"], 1, "3g.40gb"),
        (["--gres=gpu:nvidia_h100_80gb_hbm3_2g.20gb:1"], 1, "2g.20gb"),  # Slurm's name
        (["--gpus=1"], 1, None),  # the whole GPU
        (["--gres=gpu:h100:1"], 1, "h100"),
        (["--gres=gpu:1g.10gb:3", "-n", "3"], 3, "1g.10gb"),  # more than the layout: waits
        (["--gpus=7g.80gb:1"], 1, "7g.80gb"),  # an H100 profile not in the layout: waits
    ],
)
def test_mig_slices_are_asked_for_by_profile(
    options: list[str], gpus: int, gpu_type: str | None
) -> None:
    spec = on_mig(options)
    assert (spec.gpus, spec.gpu_type) == (gpus, gpu_type)


@pytest.mark.parametrize(
    "options,message",
    [
        (["--gres=gpu:1g.10gb:15"], "asks for 15 x 1g.10gb but node n0 can have at most 14"),
        (
            ["--gpus=2"],
            "asks for 2 whole GPU(s) but node n0 has 1 x 'h100' whole and MIG slices "
            "1g.10gb x2, 2g.20gb, 3g.40gb: ask for a slice by its profile, e.g. "
            "--gres=gpu:1g.10gb:1",
        ),
        (["--gpus=1g.5gb:1"], "GPU type '1g.5gb' but node n0 has 1 x 'h100' whole"),
        (
            ["--gres=gpu:1g.10gb:2"],
            "2 x 1g.10gb MIG slices for 1 task(s): CUDA uses one MIG slice per process, so "
            "run one task per slice (--ntasks=2: each task gets its own slice) or ask for "
            "one slice (--gres=gpu:1g.10gb:1)",
        ),
        (["--gpus=1g.5gb:1"], "(MIG profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb"),
    ],
)
def test_mig_requests_that_can_never_fit(options: list[str], message: str) -> None:
    with pytest.raises(Unsatisfiable) as err:
        on_mig(options)
    assert message in str(err.value)
