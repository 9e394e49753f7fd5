from __future__ import annotations

from pathlib import Path

import pytest

from podium.config.cluster import default_config, dump_config, load_config, parse_config
from podium.errors import ConfigError


def test_default_has_partition_and_three_qos_levels() -> None:
    config = default_config(gpus=4, cpus=8)
    assert config.default_partition.name == "main"
    assert {q.name: q.priority for q in config.qos} == {"high": 1000, "normal": 100, "low": 10}
    assert config.node.gpus.source == "declared" and config.node.gpus.count == 4
    assert config.node.cpus == 8


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    config = default_config(gpus=2)
    path = tmp_path / "cluster.yaml"
    path.write_text(dump_config(config))
    assert load_config(path) == config


@pytest.mark.parametrize(
    "text,message",
    [
        ("nodee: {}\n", "unknown key 'nodee' (did you mean 'node'?)"),
        ("node: {gpus: {cuont: 2}}\n", "unknown key 'node.gpus.cuont' (did you mean 'count'?)"),
        (
            "partitions: [{name: a, max_tme: '1:00'}]\n",
            "'partitions.0.max_tme' (did you mean 'max_time'?)",
        ),
        ("node: {cpus: 0}\n", "node.cpus"),
        ("default_qos: urgent\n", "default_qos 'urgent' is not one of"),
        ("partitions: [{name: a}, {name: a}]\n", "partition names must be unique"),
        ("partitions: [{name: a, max_time: forever}]\n", "invalid time 'forever'"),
        ("- a\n", "expected a mapping"),
        ("a: [b\n", "not valid YAML at line"),
        ("proctrack: magic\n", "proctrack"),
        ("resume: {requeue_exit_codes: [0]}\n", "exit code 0 means success"),
        ("resume: {requeue_exit_codes: [3], no_requeue_exit_codes: [3]}\n", "pick one"),
        ("health: {recovery: auto}\n", "health.recovery"),
        ("health: {reset_comand: x}\n", "(did you mean 'reset_command'?)"),
    ],
)
def test_errors_are_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "cfg")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "nope.yaml")


def test_partitions_name_known_nodes_and_qos_preempt_known_levels() -> None:
    ok = parse_config(
        "node: {name: n0}\npartitions: [{name: a, nodes: [n0], priority_tier: 2}]\n", "cfg"
    )
    assert ok.partitions[0].nodes == ["n0"] and ok.partitions[0].priority_tier == 2
    with pytest.raises(ConfigError, match="unknown node"):
        parse_config("node: {name: n0}\npartitions: [{name: a, nodes: [n9]}]\n", "cfg")
    with pytest.raises(ConfigError, match="may preempt only other QoS"):
        parse_config(
            "qos: [{name: high, priority: 1, preempt: [nobody]}]\ndefault_qos: high\n", "cfg"
        )


def test_shortest_first_knobs_reach_the_policy() -> None:
    from podium.sched.config_policy import policy_from_config

    config = parse_config("priority: {weight_shortness: 10000, starve_after: '1-0'}\n", "t")
    weights = policy_from_config(config).weights
    assert (weights.shortness, weights.starve_after_s, weights.jobsize) == (10000.0, 86400.0, 0.0)
    with pytest.raises(ConfigError) as info:
        parse_config("priority: {starve_after: forever}\n", "t")
    assert "\n" not in str(info.value) and "starve_after" in str(info.value)


def test_least_attained_service_is_the_default_order_and_its_knobs_reach_the_policy() -> None:
    from podium.sched.config_policy import policy_from_config

    rules = policy_from_config(parse_config("", "t")).las
    assert rules is not None
    assert (rules.queue_limits_gpu_s, rules.min_run_s, rules.starve_factor) == (
        (4000.0,), 7200.0, 0.5,
    )  # fmt: skip
    config = parse_config(
        "scheduler: {las: {queue_limits: [100, 900], min_run: 10:00, starve_factor: null}}\n", "t"
    )
    rules = policy_from_config(config).las
    assert rules is not None and (rules.queue_limits_gpu_s, rules.min_run_s) == ((100, 900), 600)
    assert rules.starve_factor is None
    assert policy_from_config(parse_config("scheduler: {order: multifactor}\n", "t")).las is None
    for bad, says in [
        ("{las: {queue_limits: [900, 100]}}", "not ascending positive GPU-seconds"),
        ("{las: {queue_limits: []}}", "queue_limits"),
        ("{las: {min_run: soon}}", "min_run"),
        ("{order: fastest}", "order"),
    ]:
        with pytest.raises(ConfigError) as info:
            parse_config(f"scheduler: {bad}\n", "t")
        assert "\n" not in str(info.value) and says in str(info.value), str(info.value)


def test_times_in_the_config_are_read_as_written() -> None:
    """Issue 44, item 1: YAML 1.1 reads an unquoted 2:00:00 as the integer 7200; the
    config reads it as the time written, numbers and booleans as before."""
    config = parse_config(
        "partitions:\n  - {name: main, default: true, max_time: 2:00:00, default_time: 1:30}\n"
        "scheduler: {preempt_exempt_time: 5:00, preemption: false}\n"
        "elastic: {min_stable: 10:00}\nkill_wait_s: 5\n",
        "test",
    )
    main = config.partitions[0]
    assert (main.max_time_s, main.max_time, main.default_time) == (7200, "2:00:00", "1:30")
    assert config.scheduler.preempt_exempt_s == 300 and config.scheduler.preemption is False
    assert config.elastic.seconds(config.elastic.min_stable) == 600 and config.kill_wait_s == 5
