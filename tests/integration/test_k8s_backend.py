"""`backend: kubernetes` on the real test cluster (scripts/k8s-testbed): `podium submit`
makes Jobs and JobSets that Kueue admits, and `podium queue/show/acct/hold/release/
cancel/requeue/drain/resume` read and act on them through the API server; what Kueue
could never admit is refused before anything is created."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conformance import check_backend
from tests.integration.k8s_cluster import start_cluster
from tests.integration.test_permissions import PYTHONPATH, _python, as_login, other_user
from tests.polling import poll

__all__ = ["other_user"]  # a fixture: a second Unix user the test may run as

pytestmark = pytest.mark.integration
PODIUM = str(Path(sys.executable).parent / "podium")
IMAGE = "nvcr.io#nvidia/pytorch:24.05-py3"  # Enroot's form: the pod gets registry/name
SLOW = {  # kwok ends these jobs' pods after an hour: they stay RUNNING for the test
    "pod-complete.stage.kwok.x-k8s.io/delay": "1h",
    "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "1h",
}


class Podium:
    """`podium` with a cluster config of its own (the test cluster's, changed)."""

    def __init__(self, directory: Path, name: str, **kubernetes: Any) -> None:
        config = yaml.safe_load((directory / "podium.yaml").read_text())
        config["kubernetes"].update(kubernetes)
        self.config = directory / f"{name}.yaml"
        self.config.write_text(yaml.safe_dump(config))
        self.home = directory / f"home-{name}"

    def __call__(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "PODIUM_CONFIG": str(self.config),
               "PODIUM_HOME": str(self.home), "HOME": str(self.home)}  # fmt: skip
        return subprocess.run(
            [PODIUM, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
        )

    def ok(self, *args: str, cwd: Path | None = None) -> str:
        done = self(*args, cwd=cwd)
        assert done.returncode == 0, done.stderr + done.stdout
        return done.stdout

    def submit(self, *args: str) -> int:
        out = self.ok("submit", "--parsable", *args)
        return int(out.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(json.loads(self.ok("show", str(job_id), "--json")))

    def wait(self, job_id: int, test: Any, timeout: float = 60) -> dict[str, Any]:
        return poll(lambda: self.job(job_id), test, f"job {job_id} never got there", timeout)


# 8 whole GPUs per node and a ninth split by MIG into 7 slices: what the device plugin
# advertises for it (podium.node.k8s_config.node_resources) is each kwok node's capacity.
GPUS = """node:
  gpus: {source: declared, count: 9, type: h100, memory_mb: 81920,
         mig: {8: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]}}
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, Any]]:
    yield from start_cluster(19400, podium_config=GPUS)


@pytest.fixture(scope="module")
def quick(cluster: tuple[Path, Any]) -> Podium:
    return Podium(cluster[0], "quick")


@pytest.fixture(scope="module")
def slow(cluster: tuple[Path, Any]) -> Podium:
    return Podium(cluster[0], "slow", pod_annotations=SLOW, image="busybox:1.36")


def _objects(api: Any) -> dict[str, set[str]]:
    """Names of the Jobs, JobSets and ConfigMaps in namespace default."""
    paths = {
        "Job": "/apis/batch/v1/namespaces/default/jobs",
        "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets",
        "ConfigMap": "/api/v1/namespaces/default/configmaps",
    }
    return {
        k: {o["metadata"]["name"] for o in api.call("GET", p)[1]["items"]} for k, p in paths.items()
    }


def test_a_two_node_sbatch_script_becomes_a_jobset_that_kueue_admits(
    cluster: tuple[Path, Any], quick: Podium, tmp_path: Path
) -> None:
    _, api = cluster
    script = tmp_path / "train.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --job-name=llama\n#SBATCH -N 2\n#SBATCH --gpus-per-node=8\n"
        "#SBATCH --container-image=nvcr.io/nvidia/pytorch:24.05-py3\n#SBATCH --time=30\n"
        "torchrun --nnodes=$WORLD_SIZE --node-rank=$NODE_RANK "
        "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT train.py\n"
    )
    job_id = quick.submit(str(script))
    done = quick.wait(job_id, lambda r: r["state"] == "COMPLETED")
    assert done["kind"] == "JobSet" and done["k8s_name"] == f"llama-{job_id}"
    assert done["name"] == "llama" and done["gpus"] == 16 and done["node_count"] == 2
    assert len(done["nodes"]) == 2 and done["exit_code"] == 0 and done["time_limit_s"] == 1800
    assert done["kueue"]["workload"].startswith(f"jobset-llama-{job_id}")
    jobset = api.call(
        "GET", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/llama-{job_id}"
    )[1]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert jobset["metadata"]["labels"]["podium.dev/job-id"] == str(job_id)
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    config_map = api.call("GET", f"/api/v1/namespaces/default/configmaps/llama-{job_id}-script")[1]
    assert config_map["data"]["script"] == script.read_text()
    assert config_map["metadata"]["ownerReferences"][0]["kind"] == "JobSet"  # goes with it
    acct = json.loads(quick.ok("acct", "--json"))
    assert [r["state"] for r in acct if r["job_id"] == job_id] == ["COMPLETED"]


def test_one_node_is_a_batch_job(cluster: tuple[Path, Any], quick: Podium) -> None:
    _, api = cluster
    job_id = quick.submit("--gpus=1", f"--container-image={IMAGE}", "--wrap", "nvidia-smi")
    done = quick.wait(job_id, lambda r: r["state"] == "COMPLETED")
    assert done["kind"] == "Job" and done["gpus"] == 1 and len(done["nodes"]) == 1
    job = api.call("GET", f"/apis/batch/v1/namespaces/default/jobs/wrap-{job_id}")[1]
    pod = job["spec"]["template"]["spec"]["containers"][0]
    assert pod["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"  # Enroot's '#' made a '/'


def test_pending_reasons_hold_release_cancel_and_requeue(slow: Podium) -> None:
    first = slow.submit("-N", "2", "--gpus-per-node=8", "-J", "first", "--wrap", "train")
    second = slow.submit("-N", "2", "--gpus-per-node=8", "-J", "second", "--wrap", "train")
    for job_id in (first, second):
        slow.wait(job_id, lambda r: r["state"] == "RUNNING" and len(r["nodes"]) == 2)
    third = slow.submit(
        "-N", "2", "--gpus-per-node=8", "-J", "third", "--wrap", "train"
    )  # 48 of 32 GPUs
    waiting = slow.wait(third, lambda r: r["reason"] == "Resources")
    assert (
        waiting["state"] == "PENDING" and "insufficient unused quota" in waiting["kueue"]["message"]
    )
    queue = slow.ok("queue")
    assert "(Resources)" in queue and "RUNNING" in queue

    assert slow.ok("hold", str(third)).strip() == f"held {third}"
    held = slow.wait(third, lambda r: r["held"])
    assert held["state"] == "PENDING" and held["reason"] == "JobHeldUser"
    refused = slow("hold", str(first))
    assert refused.returncode == 2 and "only pending jobs can be held" in refused.stderr
    slow.ok("release", str(third))
    slow.wait(third, lambda r: r["reason"] == "Resources" and not r["held"])

    slow.ok("cancel", str(first))
    cancelled = slow.job(first)
    assert cancelled["state"] == "CANCELLED" and cancelled["start_epoch"] is not None
    slow.wait(third, lambda r: r["state"] == "RUNNING")  # Kueue admits it in the freed quota

    slow.ok("requeue", str(second))
    requeued = slow.wait(second, lambda r: r["state"] == "RUNNING" and r["restart_count"] == 1)
    assert requeued["kueue"]["workload"]
    slow.ok("cancel", str(second), str(third))
    acct = {r["job_id"]: r for r in json.loads(slow.ok("acct", "--json"))}
    assert {acct[i]["state"] for i in (first, second, third)} == {"CANCELLED"}
    assert acct[first]["elapsed_s"] > 0 and acct[first]["gpu_seconds"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-N", "5", "--gpus-per-node=8"], "ClusterQueue podium can give at most 32"),
        (["--gpus=9"], "the largest node has 8"),
        (["-p", "nosuch", "--gpus=1"], "no LocalQueue 'nosuch' in namespace default"),
        (["--container-image=Bad Image!!"], "expected an image"),
        (["--container-image=/images/pytorch.sqsh"], "pulls its image from a registry"),
        (["--reservation=maint"], "Kueue has no advance reservations"),
        (["-N", "1-2"], "a node range is not supported"),
        (["--gpus=1", "--mem=900G"], "the largest node has 512Gi"),
    ],
)
def test_bad_input_is_refused_before_anything_is_created(
    cluster: tuple[Path, Any], slow: Podium, args: list[str], message: str
) -> None:
    _, api = cluster
    before = _objects(api)
    done = slow("submit", *args, "--wrap", "true")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert _objects(api) == before


def test_mig_slices_from_the_podium_config_are_requested_and_admitted(
    cluster: tuple[Path, Any], slow: Podium
) -> None:
    _, api = cluster
    node = api.call("GET", "/api/v1/nodes/kwok-node-1")[1]
    assert node["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] == "7"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    job_id = slow.submit("--gres=gpu:1g.10gb:2", "--wrap", "python infer.py")
    running = slow.wait(job_id, lambda r: r["state"] == "RUNNING" and r["nodes"])
    assert running["gpu_type"] == "1g.10gb" and running["gpus"] == 2
    job = api.call("GET", f"/apis/batch/v1/namespaces/default/jobs/wrap-{job_id}")[1]
    limits = job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/mig-1g.10gb"] == "2" and "nvidia.com/gpu" not in limits
    too_many = slow("submit", "--gres=gpu:1g.10gb:8", "--wrap", "x")
    assert too_many.returncode == 2 and "the largest node has 7" in too_many.stderr
    slow.ok("cancel", str(job_id))


def test_no_image_anywhere_is_refused(quick: Podium) -> None:
    done = quick("submit", "--gpus=1", "--wrap", "true")
    assert done.returncode == 2 and "give --container-image=IMAGE" in done.stderr


def test_dry_run_prints_the_manifests_and_creates_nothing(
    cluster: tuple[Path, Any], slow: Podium
) -> None:
    _, api = cluster
    before = _objects(api)
    out = slow.ok("submit", "--dry-run", "-N", "2", "--gpus-per-node=8", "--qos=High_Prio",
                  "--wrap", "torchrun train.py")  # fmt: skip
    docs = list(yaml.safe_load_all(out))
    assert [d["kind"] for d in docs] == ["ConfigMap", "JobSet"]
    assert docs[1]["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high-prio"
    assert _objects(api) == before


def test_test_only_asks_the_api_server_and_creates_nothing(
    cluster: tuple[Path, Any], slow: Podium
) -> None:
    _, api = cluster
    before = _objects(api)
    out = slow.ok("submit", "--test-only", "--gpus=2", "--wrap", "true")
    assert "would be queued" in out and "2 GPUs" in out
    assert _objects(api) == before


def test_drain_cordons_the_node_and_resume_returns_it(slow: Podium) -> None:
    out = slow.ok("drain", "kwok-node-2", "--reason", "fan noise")
    assert "kwok-node-2" in out
    nodes = {n["node"]: n for n in json.loads(slow.ok("nodes", "--json"))}
    assert nodes["kwok-node-2"]["state"] in ("drained", "draining")
    assert nodes["kwok-node-2"]["reason"] == "fan noise"
    assert nodes["kwok-node-2"]["health"]["label"] == "unschedulable-drained"
    slow.ok("resume", "kwok-node-2")
    nodes = {n["node"]: n for n in json.loads(slow.ok("nodes", "--json"))}
    assert nodes["kwok-node-2"]["reason"] is None and not nodes["kwok-node-2"]["health"]["fenced"]
    missing = slow("drain", "kwok-node-9", "--reason", "x")
    assert missing.returncode == 2 and "no node 'kwok-node-9'" in missing.stderr


def test_what_kubernetes_cannot_do_is_refused_in_one_line(slow: Podium) -> None:
    for args, message in (
        (["priority"], "priorities are WorkloadPriorityClasses"),
        (["share"], "ClusterQueue quotas in a cohort"),
        (["logs", "--err", "1"], "drop --err"),
    ):
        done = slow(*args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1


def _inline(kubeconfig: dict[str, Any]) -> dict[str, Any]:
    """The kubeconfig with its certificate and key files inlined (`...-data`): the
    files live in the cluster's directory, which only root may enter."""
    for section, key in (("clusters", "cluster"), ("users", "user")):
        for entry in kubeconfig.get(section) or []:
            body = entry[key]
            for name in ("certificate-authority", "client-certificate", "client-key"):
                if name in body:
                    data = Path(body.pop(name)).read_bytes()
                    body[f"{name}-data"] = base64.b64encode(data).decode()
    return kubeconfig


def test_another_user_cannot_cancel_or_hold_my_job(
    cluster: tuple[Path, Any], slow: Podium, other_user: str, request: pytest.FixtureRequest
) -> None:
    """A second Unix user with the same cluster access (a kubeconfig it may read, in a
    directory of the test's) sees the job, its own submissions carry its name, and it
    may not cancel or hold someone else's: Podium's guard on top of Kubernetes RBAC."""
    shared = Path(tempfile.mkdtemp(prefix="podium-k8s-user-"))  # pytest's tree is root's only
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)
    kubeconfig = shared / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(_inline(yaml.safe_load((cluster[0] / "kubeconfig").read_text())))
    )
    config = yaml.safe_load(slow.config.read_text())
    config["kubernetes"]["kubeconfig"] = str(kubeconfig)
    (shared / "podium.yaml").write_text(yaml.safe_dump(config))
    for path in (kubeconfig, shared / "podium.yaml"):
        path.chmod(0o644)

    def as_other(*args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(shared), "PYTHONPATH": PYTHONPATH,
               "PODIUM_CONFIG": f"{shared}/podium.yaml", "PODIUM_HOME": str(shared)}  # fmt: skip
        return subprocess.run(
            [_python[0], "-m", "podium", *args], capture_output=True, text=True, env=env,
            cwd=shared, timeout=120, **as_login(other_user),
        )  # fmt: skip

    mine = slow.submit("--gpus=1", "--wrap", "train")
    listed = as_other("queue", "--json")
    assert listed.returncode == 0 and mine in [j["job_id"] for j in json.loads(listed.stdout)]
    for action in ("cancel", "hold"):
        refused = as_other(action, str(mine))
        assert refused.returncode != 0, refused.stdout
        assert f"job {mine} is root's: only its owner or an administrator" in refused.stderr
    assert slow.job(mine)["state"] in ("PENDING", "RUNNING")
    theirs = as_other("submit", "--parsable", "--gpus=1", "--wrap", "train")
    assert theirs.returncode == 0, theirs.stderr
    record = slow.job(int(theirs.stdout.strip()))
    assert record["user"] == other_user
    slow.ok("cancel", str(mine), theirs.stdout.strip())  # root is an administrator


def test_submissions_at_once_get_distinct_ids(slow: Podium) -> None:
    """Job ids come from a compare-and-swap on one ConfigMap: six `podium submit` at
    the same moment get six ids, none twice."""
    env = {"PATH": "/usr/bin:/bin", "PODIUM_CONFIG": str(slow.config),
           "PODIUM_HOME": str(slow.home), "HOME": str(slow.home)}  # fmt: skip
    runs = [
        subprocess.Popen(
            [PODIUM, "submit", "--parsable", "--gpus=1", "-J", f"burst{i}", "--wrap", "x"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(6)
    ]
    ids = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        ids.append(int(out.strip()))
    assert len(set(ids)) == 6, ids
    slow.ok("cancel", *map(str, ids))


def test_the_kubernetes_backend_meets_the_conformance_check(
    cluster: tuple[Path, Any], slow: Podium
) -> None:
    _, api = cluster
    before = _objects(api)
    check_backend(slow)
    assert _objects(api) == before  # nothing created in the cluster either
