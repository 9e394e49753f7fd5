"""JobSpec -> Kueue manifests: golden files pin them; names are DNS-safe whatever the
job is called; what Kubernetes cannot run is refused in one line.

Regenerate the golden files after an intended change with PODIUM_UPDATE_GOLDEN=1.
The same manifests are validated by a real kube-apiserver with Kueue and JobSet in
tests/integration/test_k8s_testbed.py."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from podium.api.caller import Caller
from podium.backends.kubernetes.admission import KubernetesAdmission
from podium.backends.kubernetes.translate import Target, dns_name, manifests
from podium.config.cluster import default_config
from podium.errors import SpecError, Unsatisfiable
from podium.jobspec.build import SubmitRequest, build_job

GOLDEN = Path(__file__).with_name("golden")
CONFIG = default_config(gpus=0, cpus=8).model_copy(update={"backend": "kubernetes"})
WHO = Caller(uid=1000, gid=1000, name="alice")
TARGET = Target(namespace="team-a", local_queue="default")

CASES = {
    "single": ["--job-name=one", "--gpus=1", "--time=1:30:00", "--mem=16G",
               "--container-image=nvcr.io/nvidia/pytorch:24.05-py3"],
    "multinode": ["--job-name=llama", "-N", "2", "--ntasks-per-node=8", "--gpus-per-node=8",
                  "--cpus-per-task=4", "--mem=200G", "--exclude=gpu-7",
                  "--container-image=nvcr.io/nvidia/pytorch:24.05-py3",
                  "--checkpoint-dir=/fsx/ckpt", "--auto-resume=2"],
}  # fmt: skip


def build(options: list[str], script: str = "#!/bin/bash\ntorchrun train.py\n") -> Any:
    req = SubmitRequest(options=options, cwd="/work", environment={}, script=script)
    return build_job(req, CONFIG, WHO, 1_800_000_000.0, KubernetesAdmission("default")).spec


def render(options: list[str], target: Target = TARGET) -> str:
    return yaml.safe_dump_all(manifests(build(options), target), sort_keys=True)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    text = render(CASES[case])
    path = GOLDEN / f"{case}.yaml"
    if os.environ.get("PODIUM_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


def env_list(jobset: dict[str, Any]) -> list[dict[str, Any]]:
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    return list(job["template"]["spec"]["containers"][0]["env"])


def test_one_node_is_a_job_and_several_a_jobset_with_torchrun_variables() -> None:
    single = manifests(build(CASES["single"]), TARGET)
    assert [d["kind"] for d in single] == ["ConfigMap", "Job"]
    multi = manifests(build(CASES["multinode"]), TARGET)
    assert [d["kind"] for d in multi] == ["ConfigMap", "JobSet"]
    jobset = multi[1]
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 2 and job["completionMode"] == "Indexed"
    pod = job["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    name = jobset["metadata"]["name"]
    assert env["MASTER_ADDR"] == f"{name}-workers-0-0.{name}" and env["WORLD_SIZE"] == "2"
    assert "job-completion-index" in str(env["NODE_RANK"]) and env["RANK"] == env["NODE_RANK"]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert "kueue.x-k8s.io/priority-class" not in jobset["metadata"]["labels"]  # no QoS given
    high = manifests(build([*CASES["single"], "--qos=High_Prio"]), TARGET)[1]
    assert high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high-prio"
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    health, excluded = term["nodeSelectorTerms"][0]["matchExpressions"]
    assert health["key"] == "sagemaker.amazonaws.com/node-health-status"
    assert health["operator"] == "NotIn" and "UnschedulablePendingReboot" in health["values"]
    assert excluded["values"] == ["gpu-7"]
    failure = jobset["spec"]["failurePolicy"]  # --auto-resume=2: JobSet restarts the gang
    assert failure["maxRestarts"] == 2 and failure["rules"][0]["action"] == "FailJobSet"
    restart = next(e for e in env_list(jobset) if e["name"] == "PODIUM_RESTART_COUNT")
    assert "restart-attempt" in restart["valueFrom"]["fieldRef"]["fieldPath"]
    alone = manifests(build(["--gpus=1", "--auto-resume=1", "--container-image=busybox"]), TARGET)
    assert alone[1]["kind"] == "JobSet"  # one node with auto-resume: restarted by JobSet
    assert multi[0]["data"]["script"] == "#!/bin/bash\ntorchrun train.py\n"


@pytest.mark.parametrize("name", ["Robert'); DROP", "../../etc", "9lives", "x" * 300, "☃"])
def test_names_are_dns_labels_whatever_the_job_is_called(name: str) -> None:
    label = dns_name(name, "abcd1234")
    assert len(label) <= 63 - len("-workers-0-0")
    assert re.fullmatch(r"[a-z][a-z0-9-]*[a-z0-9]", label), label


def test_a_job_without_an_image_is_refused_with_the_hint() -> None:
    with pytest.raises(Unsatisfiable, match="give --container-image=IMAGE"):
        manifests(build(["--gpus=1"]), TARGET)
    with_default = manifests(build(["--gpus=1"]), Target("ns", "q", image="python:3.11"))
    assert with_default[1]["spec"]["template"]["spec"]["containers"][0]["image"] == "python:3.11"


def test_a_script_too_big_for_a_configmap_is_refused() -> None:
    big = "#!/bin/bash\n" + "#" * (1100 * 1024) + "\n"
    with pytest.raises(Unsatisfiable, match="a ConfigMap holds at most"):
        manifests(build(["--container-image=i"], script=big), TARGET)


def test_spares_are_refused_in_one_line() -> None:
    """--spares is the embedded cluster's (with --elastic) and Slurm's (whole nodes)."""
    with pytest.raises(SpecError, match=re.escape("add --elastic=N:N")):
        build(["-N", "2", "--spares=1", "--container-image=python:3.11"])


RACK = "podium.dev/network-rack"


def _switched(options: list[str]) -> Any:
    req = SubmitRequest(options=options, cwd="/work", environment={}, script="#!/bin/bash\n")
    return build_job(req, CONFIG, WHO, 1_800_000_000.0, KubernetesAdmission("default", RACK)).spec


@pytest.mark.parametrize(
    ("switches", "annotation"),
    [("1", "kueue.x-k8s.io/podset-required-topology"),
     ("1@10:00", "kueue.x-k8s.io/podset-preferred-topology")],
)  # fmt: skip
def test_switches_1_asks_kueue_for_one_leaf_switch(switches: str, annotation: str) -> None:
    spec = _switched(["-N", "2", f"--switches={switches}", "--container-image=python:3.11"])
    jobset = manifests(spec, Target("ns", "q", switch_label=RACK))[1]
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {annotation: RACK}


@pytest.mark.parametrize(
    ("switches", "words"),
    [("2", "ask for --switches=1"), ("one", "expected COUNT[@TIME]"),
     ("1@soon", "expected COUNT[@TIME]")],
)  # fmt: skip
def test_switches_kueue_cannot_express_are_refused(switches: str, words: str) -> None:
    with pytest.raises(SpecError, match=re.escape(words)):
        _switched(["-N", "2", f"--switches={switches}", "--container-image=python:3.11"])
    with pytest.raises(SpecError, match="this cluster has no network topology"):
        build(["-N", "2", "--switches=1", "--container-image=python:3.11"])
