from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from podium.api import arrays
from podium.api.caller import Caller
from podium.config.cluster import ClusterConfig, GpuInventory, NodeConfig, Partition
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import Draft, SubmitRequest, build_job
from podium.jobspec.job import Dependency, JobSpec
from podium.server.embedded_admission import EmbeddedAdmission

NOW = 1_800_000_000.0
ME = Caller(uid=1000, gid=1000, name="alice")
ADMIT = EmbeddedAdmission()  # the daemon's: every spec needs a backend to admit it


def config() -> ClusterConfig:
    return ClusterConfig(
        node=NodeConfig(
            name="n0",
            cpus=16,
            memory_mb=64000,
            gpus=GpuInventory(source="declared", count=4, type="h100"),
        ),
        partitions=[
            Partition(name="main", default=True, default_time="1:00:00"),
            Partition(name="short", max_time="10"),
        ],
    )


def build(
    script: str = "#!/bin/sh\ntrue\n",
    options: list[str] | None = None,
    who: Caller = ME,
    **kw: object,
) -> JobSpec:
    req = SubmitRequest(
        script=script,
        options=options or [],
        cwd="/tmp",
        environment={"HOME": "/home/a", "PATH": "/bin", "SECRET": "x"},
        **kw,
    )
    return build_job(req, config(), who, NOW, ADMIT).spec


def test_script_then_yaml_then_command_line() -> None:
    script = "#!/bin/sh\n#SBATCH -J script -G 1 --qos=low -t 5\n"
    spec = build(script, ["-J", "cli"], yaml_text="job-name: yaml\nqos: high\n")
    assert (spec.name, spec.qos, spec.gpus, spec.time_limit_s) == ("cli", "high", 1, 300)


def test_resources() -> None:
    spec = build(options=["-n", "4", "-c", "2", "--gpus-per-task=1", "--mem-per-cpu=1G"])
    assert (spec.ntasks, spec.cpus, spec.gpus, spec.gpus_per_task, spec.mem_mb) == (
        4,
        8,
        4,
        1,
        8192,
    )
    spec = build(options=["--gres=gpu:h100:2", "--cpus-per-gpu=3", "--mem-per-gpu=10G"])
    assert (spec.gpus, spec.gpu_type, spec.cpus, spec.mem_mb) == (2, "h100", 6, 20480)
    spec = build(options=["--exclusive", "-G", "1"])
    assert (spec.exclusive, spec.cpus, spec.mem_mb, spec.gpus) == ("node", 16, 64000, 1)
    spec = build(options=["--ntasks-per-node=3", "--nodes=1-1", "--wait-all-nodes=1"])
    assert spec.ntasks == 3


def test_conflicting_gpu_requests() -> None:
    with pytest.raises(SpecError, match="asks for 2 GPUs in all but another option asked for 3"):
        build(options=["-G", "3", "-n", "2", "--gpus-per-task=1"])
    with pytest.raises(SpecError, match="conflicts"):
        build(options=["--gres=gpu:h100:1", "--gpus=a100:1"])


def test_export_modes() -> None:
    assert build().environment["SECRET"] == "x"
    env = build(options=["--export=NONE"]).environment
    assert "SECRET" not in env and env["HOME"] == "/home/a"
    env = build(options=["--export=SECRET,NEW=1"]).environment
    assert env["SECRET"] == "x" and env["NEW"] == "1" and "HOME" in env
    with pytest.raises(SpecError, match="not a valid environment variable"):
        build(options=["--export=ALL,1BAD=2"])


def test_dependencies_arrays_signals() -> None:
    spec = build(options=["-d", "afterok:1:2,afterany:3_4,singleton"])
    assert spec.dependencies == (
        Dependency(kind="afterok", job_ids=(1, 2)),
        Dependency(kind="afterany", job_ids=(3,)),
        Dependency(kind="singleton"),
    )
    assert build(options=["-d", "afterok:1?afternotok:2"]).dependency_any
    spec = build(options=["--array=0-6:2,9%2"])
    assert spec.array is not None and spec.array.ranges == "0-6:2,9"
    assert tuple(arrays.each(arrays.parse(spec.array.ranges))) == (0, 2, 4, 6, 9)
    assert spec.array.throttle == 2
    spec = build(options=["--signal=B:USR1@90"])
    assert spec.signal is not None
    assert (spec.signal.signum, spec.signal.seconds_before, spec.signal.batch_only) == (
        10,
        90,
        True,
    )
    with pytest.raises(SpecError, match="before the start"):
        build(options=["-t", "1", "--signal=USR1@60"])


def test_requeue_pair_last_wins() -> None:
    assert build(options=["--no-requeue", "--requeue"]).requeue is True
    assert build("#!/bin/sh\n#SBATCH --requeue\n", ["--no-requeue"]).requeue is False


def test_wrap_and_script_sources() -> None:
    req = SubmitRequest(wrap="echo hi", cwd="/tmp")
    assert build_job(req, config(), ME, NOW, ADMIT).spec.script == "#!/bin/sh\necho hi\n"
    with pytest.raises(SpecError, match="not several"):
        build_job(
            SubmitRequest(wrap="x", script="#!/bin/sh\n", cwd="/tmp"), config(), ME, NOW, ADMIT
        )
    with pytest.raises(SpecError, match="nothing to run"):
        build_job(SubmitRequest(cwd="/tmp"), config(), ME, NOW, ADMIT)


def test_negative_nice_is_for_admins() -> None:
    with pytest.raises(SpecError, match="administrator"):
        build(options=["--nice=-5"])
    admin = Caller(uid=0, gid=0, name="root", is_admin=True)
    assert build(options=["--nice=-5"], who=admin).nice == -5
    assert build(options=["--nice"]).nice == 100


def test_begin_and_mail() -> None:
    assert build(options=["--begin=now+60"]).begin_time == NOW + 60
    assert build(options=["--mail-type=NONE"]).mail_types == ()


def test_resilience_options() -> None:
    spec = build(
        "#!/bin/sh\n#PODIUM --auto-resume=3\n#PODIUM --heartbeat-timeout=90\ntrue\n",
        ["--requeue-exit=75,137", "--no-requeue-exit=3"],
    )
    assert spec.auto_resume == 3 and spec.heartbeat_timeout_s == 90
    assert spec.requeue_exit_codes == (75, 137) and spec.no_requeue_exit_codes == (3,)
    assert build(options=["--heartbeat-timeout=5:00"]).heartbeat_timeout_s == 300
    assert build().auto_resume == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--auto-resume=x"], "expected a number of restarts 0-1000, got 'x'"),
        (["--requeue-exit=75,300"], "expected exit codes 0-255 separated by commas, got '300'"),
        (["--requeue-exit=0"], "exit code 0 means success"),
        (["--requeue-exit=3", "--no-requeue-exit=3"], "exit code 3 is also in --requeue-exit"),
        (["--heartbeat-timeout=0"], "needs a positive time"),
    ],
)
def test_bad_resilience_options(options: list[str], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        build(options=options)


def test_podium_options_are_refused_in_sbatch_lines() -> None:
    with pytest.raises(SpecError, match="--auto-resume is a Podium option: write it as #PODIUM"):
        build("#!/bin/sh\n#SBATCH --auto-resume=2\ntrue\n")


@pytest.mark.parametrize(
    "value",
    ["--exec=!id > /tmp/x", "-oProxyCommand=x", "a b@example.org", "x@-evil", "", "$(id)"],
)
def test_mail_user_must_be_a_name_or_an_address(value: str) -> None:
    with pytest.raises(SpecError, match="expected a user name or an e-mail address"):
        build(options=[f"--mail-user={value}"])


def test_mail_user_accepts_names_and_addresses() -> None:
    assert build(options=["--mail-user=ops@example.org"]).mail_user == "ops@example.org"
    assert build(options=["--mail-user=bob"]).mail_user == "bob"


def test_chdir_is_left_for_the_user_to_check() -> None:
    built = build_job(
        SubmitRequest(
            script="#!/bin/sh\n", options=["--chdir=/root/x", "-o", "logs/%j.out"], cwd="/tmp"
        ),
        config(),
        ME,
        NOW,
        ADMIT,
    )
    assert built.spec.work_dir == "/root/x"
    assert built.enter_dirs == ("/root/x",) and built.write_dirs == ("/root/x/logs",)


def test_arrays_are_sized_before_they_are_expanded() -> None:
    import time

    began = time.monotonic()
    with pytest.raises(SpecError, match="MaxArraySize=1001"):
        build(options=["--array=0-50000000"])
    with pytest.raises(SpecError, match="at most 1001 tasks"):
        build(options=["--array=0-1000,0-1000:2"])
    assert time.monotonic() - began < 0.5
    assert build(options=["--array=0-1000:500"]).array.ranges == "0-1000:500"  # type: ignore[union-attr]
    big = build(options=["--array=0-399,600-999"]).array  # written as ranges, never listed
    assert big is not None and big.ranges == "0-399,600-999" and big.count == 800


def test_request_text_must_be_storable() -> None:
    from pydantic import ValidationError

    for bad in (
        {"script": "#!/bin/sh\n\ud800"},
        {"script": "#!/bin/sh\n", "cwd": "/tmp\x00x"},
        {"script": "#!/bin/sh\n", "environment": {"A=B": "1"}},
        {"script": "#!/bin/sh\n", "environment": {"": "1"}},
        {"script": "#!/bin/sh\n", "options": ["-J", "x\x00"]},
    ):
        with pytest.raises(ValidationError):
            SubmitRequest(**{"cwd": "/tmp", **bad})  # type: ignore[arg-type]


OPTION_NAMES = [
    "ntasks", "cpus-per-task", "gpus", "gres", "mem", "time", "array", "dependency", "nice",
    "begin", "signal", "output", "job-name", "heartbeat-timeout", "auto-resume", "mincpus",
    "requeue-exit", "time-min", "cpus-per-gpu", "mem-per-gpu", "gpus-per-task", "qos",
]  # fmt: skip


@given(
    st.lists(
        st.tuples(
            st.sampled_from(OPTION_NAMES),
            st.one_of(
                st.integers(min_value=-(2**70), max_value=2**70).map(str),
                st.text(max_size=30),
                st.from_regex(r"[0-9]{1,25}(-[0-9]{1,25})?(%[0-9]{1,25})?", fullmatch=True),
            ),
        ),
        max_size=4,
    )
)
@settings(max_examples=300, deadline=None)
def test_any_option_value_is_refused_cleanly_or_fits_the_database(
    options: list[tuple[str, str]],
) -> None:
    try:
        req = SubmitRequest(
            script="#!/bin/sh\n", options=[f"--{k}={v}" for k, v in options], cwd="/tmp"
        )
        spec = build_job(req, config(), ME, NOW, ADMIT).spec
    except (SpecError, ValidationError):
        return
    for value in (
        spec.cpus,
        spec.gpus,
        spec.mem_mb,
        spec.ntasks,
        spec.time_limit_s or 0,
        spec.nice,
    ):
        assert -(2**63) <= value < 2**63
    for dep in spec.dependencies:
        assert all(0 < j < 2**32 for j in dep.job_ids)


class Recording:
    """An admission that keeps what sbatch's reading gave it and fills in names."""

    REFUSES = {"uid": "no"}

    def __init__(self) -> None:
        self.seen: Draft | None = None

    def admit(self, draft: Draft) -> None:
        self.seen = draft
        draft.fields.update(partition="p", qos="q", account="a")


def test_admission_sees_sbatch_semantics_and_decides_the_rest() -> None:
    admission = Recording()
    req = SubmitRequest(
        script="#!/bin/sh\n#SBATCH --nodes=2-4 --nodelist=a[1-2] --constraint=x|y\n",
        options=["--exclusive", "-t", "5", "--signal=USR1@60", "--container-image=img"],
        cwd="/tmp",
    )
    spec = build_job(req, config(), ME, NOW, admission).spec
    draft = admission.seen
    assert draft is not None and draft.max_nodes == 4
    assert (spec.nodes, spec.nodelist, spec.constraint) == (2, ("a[1-2]",), "x|y")
    assert (spec.exclusive, spec.cpus) == ("node", 2)  # sizing a whole node is the backend's
    assert (spec.partition, spec.container_image, spec.time_limit_s) == ("p", "img", 300)
    given = draft.given("nodes")
    assert given is not None and given.where.startswith("line 2")


def test_the_signal_is_checked_against_the_admitted_time_limit() -> None:
    req = SubmitRequest(script="#!/bin/sh\n", options=["--signal=USR1@7200"], cwd="/tmp")
    with pytest.raises(SpecError, match="7200s before a 3600s limit"):
        build_job(req, config(), ME, NOW, ADMIT)  # the partition's default: one hour


@pytest.mark.parametrize(
    "options,expected",
    [
        (["--gres=mps:50"], ("mps", 50, 4000)),
        (["--gres=shard:2"], ("shard", 2, 4000)),
        (["--gres=mps:25", "--mem-per-gpu=8G"], ("mps", 25, 8192)),  # of one GPU
    ],
)
def test_shares_of_a_gpu(options: list[str], expected: tuple[str, int, int]) -> None:
    spec = build_job(
        SubmitRequest(script="#!/bin/sh\ntrue\n", options=options, cwd="/tmp"),
        shared_config(),
        ME,
        NOW,
        ADMIT,
    ).spec
    assert (spec.gpu_type, spec.gpus, spec.mem_mb) == expected


def shared_config() -> ClusterConfig:
    c = config()
    c.node.gpus = GpuInventory(
        source="declared",
        count=2,
        type="h100",
        memory_mb=81920,
        sharing={0: {"shards": 4}, 1: {"mps": 100}},  # type: ignore[dict-item]
    )
    return c


@pytest.mark.parametrize(
    "options,message",
    [
        (["--gres=mps:150"], "mps:150 is over 100: a share is a percent of a GPU"),
        (["--gres=gpu:1,mps:50"], "give GPUs, an MPS share or shards, one of them"),
        (["--gpus=mps:1"], "'mps' is not a GPU type: ask for a share with --gres=mps:N"),
        (["--gres=mps:0"], "expected mps:N with N at least 1"),
        (["--gres=mps:20", "--gpus-per-node=20"], "--gres=mps:N is a share of one GPU: not per"),
        (["--gres=shard:5"], "on node n0 its GPUs have 4 shard units"),
    ],
)
def test_bad_shares_are_one_line(options: list[str], message: str) -> None:
    with pytest.raises((SpecError, Unsatisfiable)) as err:
        build_job(
            SubmitRequest(script="#!/bin/sh\ntrue\n", options=options, cwd="/tmp"),
            shared_config(),
            ME,
            NOW,
            ADMIT,
        )
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_share_on_a_node_without_one_is_refused() -> None:
    with pytest.raises(Unsatisfiable, match=r"no GPU of node n0 is shared by MPS"):
        build(options=["--gres=mps:10"])


def test_an_elastic_job_is_sized_per_replica_and_stored_at_min() -> None:
    spec = build(
        "#!/bin/sh\n#PODIUM --elastic=2:8:2\n#PODIUM --resize-grace=2:00\n",
        ["--gpus-per-task=1", "--cpus-per-task=3", "--mem-per-gpu=4G", "--resize-signal=USR2"],
    )
    e = spec.elastic
    assert e is not None
    assert (e.min, e.max, e.step, e.replica_gpus, e.replica_cpus, e.replica_mem_mb) == (
        2, 8, 2, 1, 3, 4096)  # fmt: skip
    assert (e.grace_s, e.signal, e.sizes()) == (120, 12, [8, 6, 4, 2])
    assert (spec.ntasks, spec.gpus, spec.cpus, spec.mem_mb) == (2, 2, 6, 8192)
    assert build(options=["--elastic=1:7:3"]).elastic.sizes() == [7, 4, 1]  # type: ignore[union-attr]
    for options, says in [
        (["--elastic=2"], "expected MIN:MAX[:STEP]"),
        (["--elastic=3:2"], "needs 1 <= MIN <= MAX"),
        (["--elastic=1:2", "--mem=4G"], "--mem-per-gpu or --mem-per-cpu"),
        (["--elastic=1:2", "-N", "2"], "share one node"),
        (["--resize-signal=USR1"], "applies to elastic jobs only"),
    ]:
        with pytest.raises(SpecError, match=re.escape(says)):
            build(options=options)


def test_spares_are_held_per_replica_beside_the_replicas() -> None:
    """--spares=N: N replicas' worth more, held idle to replace a failed replica
    (docs/resiliency.md); stored, like the replicas, at MIN plus the spares."""
    spec = build(options=["--elastic=2:4", "--spares=1", "--gpus-per-task=1",
                          "--cpus-per-task=3", "--mem-per-gpu=4G"])  # fmt: skip
    e = spec.elastic
    assert e is not None and e.spares == 1
    assert (spec.ntasks, spec.gpus, spec.cpus, spec.mem_mb) == (2, 3, 9, 12288)
    assert e.held(4) == (5, 15, 20480)
    assert (e.replicas_of(9), e.replicas_of(15)) == (2, 4)  # the spares not counted
    for options, says in [
        (["--spares=1", "--gpus=1"], "add --elastic=N:N"),
        (["--elastic=1:2", "--spares=-1", "--gpus-per-task=1"], "number of spare replicas"),
        (["--elastic=1:2", "--spares=65", "--gpus-per-task=1"], "0 to 64"),
        (["--elastic=1:2", "--spares=1"], "give --gpus-per-task"),
    ]:
        with pytest.raises(SpecError, match=re.escape(says)):
            build(options=options)


def test_torchft_makes_each_replica_a_replica_group() -> None:
    """--torchft: the replicas are torchft replica groups (podium.run.torchft): an
    elastic job's (the embedded cluster), or one per node beside spare nodes (Slurm);
    with neither there are no replicas to make groups of."""
    spec = build(options=["--elastic=2:2", "--spares=1", "--gpus-per-task=1", "--torchft"])
    assert spec.torchft and spec.elastic is not None and spec.elastic.spares == 1
    assert build(options=["--elastic=2:2"]).torchft is False
    with pytest.raises(SpecError, match=re.escape("--torchft: each replica is a torchft")):
        build(options=["--torchft", "--gpus=1"])
