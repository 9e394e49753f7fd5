"""Elastic jobs on Slurm, the pure parts: the sizes a job may take, when it shrinks
for a waiting job and by how much, what it carries to its keeper, and its members
folded into one record."""

from __future__ import annotations

from typing import Any

import pytest

from podium.api.caller import Caller
from podium.api.elastic_sizes import elastic_sizes, largest_fitting
from podium.backends.slurm.admission import SlurmAdmission
from podium.backends.slurm.elastic_keeper import shrink_to
from podium.backends.slurm.elastic_slurm import Waiting, signal_steps
from podium.backends.slurm.elastic_submit import elastic_exports
from podium.backends.slurm.elastic_view import fold_members, member_of
from podium.config.cluster import ClusterConfig, default_config
from podium.jobspec.build import SubmitRequest, build_job
from podium.jobspec.job import JobSpec

QOS = [
    {"name": "high", "priority": 1000, "preempt": ["low"]},
    {"name": "normal", "priority": 100},
    {"name": "low", "priority": 10},
]
CONFIG = ClusterConfig.model_validate(
    {**default_config(gpus=0, cpus=8).model_dump(), "backend": "slurm", "qos": QOS,
     "elastic": {"grow_delay": "0:30"}}
)  # fmt: skip


def _spec(options: list[str]) -> JobSpec:
    req = SubmitRequest(options=options, cwd="/w", environment={}, script="#!/bin/bash\n")
    who = Caller(uid=1000, gid=1000, name="alice")
    return build_job(req, CONFIG, who, 1_800_000_000.0, SlurmAdmission()).spec


def _waiting(job_id: str, qos: str, nodes: int, reason: str = "Resources") -> Waiting:
    return Waiting(job_id, qos, nodes, reason, "")


def test_sizes_are_min_by_step_and_max() -> None:
    assert elastic_sizes(1, 4, 1) == [4, 3, 2, 1]
    assert elastic_sizes(2, 7, 2) == [7, 6, 4, 2]
    assert largest_fitting([2, 4, 6, 7], 5) == 4 and largest_fitting([2, 4], 1) is None


def test_a_preempting_qos_takes_only_the_nodes_it_lacks() -> None:
    allowed, high = [1, 2, 3, 4], {"high"}
    assert shrink_to(4, allowed, [_waiting("9", "high", 2)], 1, high) == (
        3,
        "shrink 4->3 for job 9",
    )
    assert shrink_to(4, allowed, [_waiting("9", "high", 2)], 2, high) is None  # it fits
    assert shrink_to(2, allowed, [_waiting("9", "high", 3)], 0, high) is None  # not enough
    assert shrink_to(4, allowed, [_waiting("9", "normal", 2)], 0, high) is None  # may not
    assert shrink_to(4, allowed, [_waiting("9", "high", 2, "Dependency")], 0, high) is None
    step_two = shrink_to(4, [2, 4], [_waiting("9", "high", 1)], 0, high)
    assert step_two == (2, "shrink 4->2 for job 9")  # whole steps only
    member = Waiting("10", "high", 1, "Resources", member_of="3")
    assert shrink_to(4, allowed, [member], 0, high) is None  # another job's member


def test_the_keeper_gets_its_sizes_the_qos_that_shrink_it_and_a_members_shape() -> None:
    spec = _spec(["--elastic=1:4:1", "--gpus-per-task=2", "--qos=low", "--resize-grace=30"])
    assert (spec.nodes, spec.ntasks, spec.gpus_per_node, spec.exclusive) == (1, 1, 2, "node")
    env = elastic_exports(spec, CONFIG)
    assert env["PODIUM_ELASTIC"] == "1:4:1" and env["PODIUM_RESIZE_GRACE"] == "30"
    assert env["PODIUM_SHRINK_FOR"] == "high" and env["PODIUM_GROW_DELAY"] == "30"
    member = env["PODIUM_MEMBER_SBATCH"].splitlines()
    assert "#SBATCH --gpus-per-node=2" in member and "#SBATCH --output=/dev/null" in member
    assert "#SBATCH --exclusive" in member and "#SBATCH --qos=low" in member
    assert elastic_exports(_spec(["--qos=high"]), CONFIG) == {}
    assert elastic_exports(_spec(["--elastic=1:2"]), CONFIG)["PODIUM_SHRINK_FOR"] == ""


def _record(job_id: int, nodes: list[str], comment: str | None = None) -> dict[str, Any]:
    return {"job_id": job_id, "uid": 1000, "state": "RUNNING", "nodes": nodes,
            "node": ",".join(nodes),
            "node_count": len(nodes), "gpus": 2, "cpus": 4, "ntasks": 1, "comment": comment,
            "gpu_ids_by_node": {n: [0, 1] for n in nodes}}  # fmt: skip


def test_members_fold_into_their_job() -> None:
    records = [
        _record(3, ["n3"]),
        _record(4, ["n4"], "podium-elastic-member:3"),
        _record(5, ["n1"], "podium-elastic-member:77"),  # its job is not listed
        _record(6, ["n2"], "a user's own comment"),
        {**_record(7, ["n5"], "podium-elastic-member:3"), "slurm_state": "COMPLETING"},
    ]
    folded = fold_members(records)
    assert [r["job_id"] for r in folded] == [3, 5, 6]  # 5's job is not listed: itself
    assert folded[0]["nodes"] == ["n3", "n4"] and folded[0]["gpus"] == 4
    assert folded[0]["ntasks"] == 2 and folded[0]["gpu_ids_by_node"]["n4"] == [0, 1]
    assert member_of(records[1]) == 3 and member_of(records[3]) is None


@pytest.mark.parametrize("comment", ["podium-elastic-member:", "podium-elastic-member:3x"])
def test_a_malformed_member_tag_is_no_member(comment: str) -> None:
    assert member_of(_record(4, ["n4"], comment)) is None


def test_another_users_job_cannot_pose_as_a_member() -> None:
    """Anyone may write any --comment: a job of another user tagged as job 3's member
    is not folded into it, and is listed as itself."""
    posing = {**_record(9, ["n9"], "podium-elastic-member:3"), "uid": 2000}
    folded = fold_members([_record(3, ["n3"]), posing])
    assert [r["job_id"] for r in folded] == [3, 9] and folded[0]["nodes"] == ["n3"]


def test_a_signal_that_reaches_no_step_names_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Slurm tools on PATH (as when `squeue` times out): no step is listed, so each
    job is said missed, for the keeper to signal it again."""
    monkeypatch.setenv("PATH", "/nonexistent")
    assert signal_steps(["12", "13"], 10) == ["12", "13"]
    assert signal_steps([], 10) == []
