"""Accounts and QoS -> Kueue team quotas: quotas split by shares (every GPU someone's),
borrowing capped by max_gpus, reclaim by preemption, a priority class per QoS.
The same objects are applied to a real Kueue in tests/integration/test_k8s_testbed.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from podium.backends.kubernetes.cluster_queues import queue_teams
from podium.backends.kubernetes.teams import Capacity, split, teams
from podium.config.cluster import ClusterConfig
from podium.config.team_config import Team

GOLDEN = Path(__file__).with_name("golden")
CONFIG = ClusterConfig.model_validate(
    {
        "node": {"name": "n", "cpus": 8, "memory_mb": 16000,
                 "gpus": {"source": "declared", "count": 8, "type": "h100"}},
        "qos": [{"name": "low", "priority": 10}, {"name": "normal", "priority": 100},
                {"name": "high", "priority": 1000, "preempt": ["low"]}],
        "accounts": [{"name": "vision", "shares": 2, "max_gpus": 24},
                     {"name": "NLP_Lab", "shares": 1}],
    }
)  # fmt: skip


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_golden() -> None:
    text = yaml.safe_dump_all(teams(CONFIG, Capacity(32, 256, 2048)), sort_keys=False)
    path = GOLDEN / "teams.yaml"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def test_quotas_follow_shares_and_borrowing_stops_at_max_gpus() -> None:
    docs = teams(CONFIG, Capacity(32, 256, 2048))
    queues = {q["metadata"]["name"]: q for q in by_kind(docs, "ClusterQueue")}
    assert set(queues) == {"team-vision", "team-nlp-lab"}
    gpu = {
        name: next(r for r in q["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
                   if r["name"] == "nvidia.com/gpu")
        for name, q in queues.items()
    }  # fmt: skip
    assert gpu["team-vision"] == {"name": "nvidia.com/gpu", "nominalQuota": 21, "borrowingLimit": 3}
    assert gpu["team-nlp-lab"] == {"name": "nvidia.com/gpu", "nominalQuota": 11}  # no cap
    assert {q["spec"]["cohortName"] for q in queues.values()} == {"podium"}
    assert all(q["spec"]["preemption"]["reclaimWithinCohort"] == "Any" for q in queues.values())
    priorities = {p["metadata"]["name"]: p["value"] for p in by_kind(docs, "WorkloadPriorityClass")}
    assert priorities == {"low": 10, "normal": 100, "high": 1000}
    local = by_kind(docs, "LocalQueue")
    assert {(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in local} == {
        ("team-vision", "team-vision"), ("team-nlp-lab", "team-nlp-lab")}  # fmt: skip


def test_no_accounts_is_one_team_with_everything() -> None:
    config = CONFIG.model_copy(update={"accounts": []})
    [queue] = by_kind(teams(config, Capacity(8, 64, 512)), "ClusterQueue")
    assert queue["metadata"]["name"] == "team-default"
    resources = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert [r["nominalQuota"] for r in resources] == [64, "512Gi", 8]


@given(st.integers(0, 1000), st.lists(st.integers(0, 50), min_size=1, max_size=12))
def test_a_split_gives_everything_in_proportion(total: int, shares: list[int]) -> None:
    parts = split(total, shares)
    if sum(shares) == 0:
        assert parts == [0] * len(shares)
        return
    assert sum(parts) == total and all(p >= 0 for p in parts)
    for part, share in zip(parts, shares, strict=True):
        assert abs(part - total * share / sum(shares)) < 1


def test_render_teams_cli_refuses_a_bad_prefix(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from podium.cli.app import cli

    config = tmp_path / "cluster.yaml"
    config.write_text("accounts: [{name: a}]\n")
    runner = CliRunner()
    args = ["k8s", "render", "teams", "--config", str(config), "--gpus", "8", "--cpus", "8",
            "--memory-gi", "64"]  # fmt: skip
    done = runner.invoke(cli, [*args, "--prefix", "Team_"])
    assert done.exit_code == 2 and "a DNS label" in done.output
    ok = runner.invoke(cli, args)
    assert ok.exit_code == 0 and "kind: ClusterQueue" in ok.output, ok.output


def test_configured_teams_become_cluster_queues_and_read_back_as_teams() -> None:
    config = CONFIG.model_copy(
        update={
            "teams": [
                Team.model_validate(t)
                for t in [
                    {"name": "vision", "cohort": "lab", "quota": {"gpus": 4},
                     "borrowing_limit": {"gpus": 4}, "lending_limit": {"gpus": 2},
                     "accounts": ["vision"]},
                    {"name": "nlp", "cohort": "lab", "quota": {"gpus": 4}, "users": ["carol"],
                     "reclaim_within_cohort": "lower_priority"},
                    {"name": "solo", "quota": {"gpus": 2}, "users": ["sam"]},
                ]
            ]
        }
    )  # fmt: skip
    queues = by_kind(teams(config, Capacity(10, 100, 1000)), "ClusterQueue")
    gpu = {
        q["metadata"]["name"]: next(
            r for r in q["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
            if r["name"] == "nvidia.com/gpu")
        for q in queues
    }  # fmt: skip
    assert gpu == {
        "team-vision": {"name": "nvidia.com/gpu", "nominalQuota": 4, "borrowingLimit": 4,
                        "lendingLimit": 2},
        "team-nlp": {"name": "nvidia.com/gpu", "nominalQuota": 4},
        "team-solo": {"name": "nvidia.com/gpu", "nominalQuota": 2, "borrowingLimit": 0,
                      "lendingLimit": 0},
    }  # fmt: skip
    by_name = {q["metadata"]["name"]: q["spec"] for q in queues}
    assert by_name["team-nlp"]["preemption"]["reclaimWithinCohort"] == "LowerPriority"
    assert by_name["team-vision"]["cohortName"] == "lab"
    # What Kueue reports back (status.flavorsUsage) reads as Podium's teams.
    by_name_status = {"team-vision": 6, "team-nlp": 1, "team-solo": 0}
    for q in queues:
        q["status"] = {
            "flavorsUsage": [{"name": "h100", "resources": [
                {"name": "nvidia.com/gpu", "total": str(by_name_status[q["metadata"]["name"]])}]}],
            "pendingWorkloads": 2,
        }  # fmt: skip
    rows = {r["name"]: r for r in queue_teams(queues)}
    assert (rows["team-vision"]["borrowed_gpus"], rows["team-nlp"]["lent_gpus"]) == (2, 2)
    assert rows["team-solo"]["quota_gpus"] == 2 and rows["team-solo"]["pending_jobs"] == 2
    assert rows["team-solo"]["pending_gpus"] is None  # Kueue does not say


def test_team_weights_render_as_fair_sharing_weights_and_read_back() -> None:
    config = ClusterConfig.model_validate(
        {
            "node": {"name": "n", "cpus": 8, "memory_mb": 16000,
                     "gpus": {"source": "declared", "count": 8, "type": "h100"}},
            "teams": [
                {"name": "a", "cohort": "lab", "quota": {"gpus": 4}, "weight": 3,
                 "users": ["ann"]},
                {"name": "b", "cohort": "lab", "quota": {"gpus": 4}, "weight": 0.5,
                 "users": ["ben"]},
            ],
        }
    )  # fmt: skip
    queues = by_kind(teams(config, Capacity(8, 64, 512)), "ClusterQueue")
    assert [q["spec"]["fairSharing"] for q in queues] == [{"weight": "3"}, {"weight": "0.5"}]
    shown = {r["name"]: r["weight"] for r in queue_teams(queues)}
    assert shown == {"team-a": 3.0, "team-b": 0.5}
