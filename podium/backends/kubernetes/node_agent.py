"""HyperPod's node health agent on Kubernetes: `podium k8s agent --node NODE`.

In production it runs on every GPU node as a DaemonSet pod (NODE from the downward
API's `spec.nodeName`); on the test cluster, as a local process per kwok node. Each
pass:

1. Runs the node's quick checks (podium.node.health: GPUs through NVML, Xid in the
   kernel log, disks, mounts), as the Slurm hook and the embedded agent do.
2. A fault the recovery ladder fences takes the node out of service, as HyperPod does:
   - the label `sagemaker.amazonaws.com/node-health-status` becomes
     `UnschedulablePendingReboot` (reboot), `UnschedulablePendingReplacement`
     (replace) or `Unschedulable` (drain, reset);
   - the taint `sagemaker.amazonaws.com/node-health-status=Unschedulable:NoSchedule`
     keeps new pods off it, and the reason (`podium: CHECK: WHY`) is an annotation;
   - its pods are evicted (the Eviction API) when the fault took a GPU away (reset,
     reboot, replace) and left running for a drain. Jobs with `--auto-resume=N` are
     JobSets whose failure policy restarts them elsewhere (their pods avoid the label).
3. A node Podium took out comes back once the fault's remedy is done (the reset
   command run; for a reboot, a new boot id; a replacement never by itself) and a deep
   check passes: `deep-health-check-status` is `InProgress` while a Job pinned to the
   node (tolerating the taint) runs `podium health --deep` there, then `Passed` or
   `Failed`; only `Passed` makes the node `Schedulable` and lifts the taint.

Nodes labelled or tainted by anyone else (no `podium:` reason) are left alone.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from podium.backends.kubernetes.engine_api import KubeApi, Obj
from podium.backends.kubernetes.parse import DRAIN_ANNOTATION, condition
from podium.backends.kubernetes.translate import HEALTH_LABEL, dns_label
from podium.config.cluster import ClusterConfig
from podium.errors import ApiError
from podium.node.health.check_results import Action, Result
from podium.node.health.suite import run_node_checks
from podium.recover.ladder import PREFIX, fence_reason, fencing_faults
from podium.recover.saved_fault import SavedFault

DEEP_LABEL = "sagemaker.amazonaws.com/deep-health-check-status"
TAINT = {"key": HEALTH_LABEL, "value": "Unschedulable", "effect": "NoSchedule"}
EVICTING = (Action.RESET, Action.REBOOT, Action.REPLACE)


def health_value(bad: list[Result]) -> str:
    """HyperPod's node-health-status for these faults (the strongest remedy)."""
    actions = {r.action for r in bad}
    if Action.REPLACE in actions:
        return "UnschedulablePendingReplacement"
    if Action.REBOOT in actions:
        return "UnschedulablePendingReboot"
    return "Unschedulable"


def deep_check_job(node: str, namespace: str, image: str, command: list[str]) -> Obj:
    """A Job that runs `command` once on `node` (pinned by nodeName, tolerating the
    health taint). It names no queue, but Kueue puts a namespace's jobs in its LocalQueue
    `default` where there is one (LocalQueueDefaulting): it asks for no resources, so it
    is admitted at once (seen on the test cluster)."""
    name = dns_label(f"podium-deep-check-{node}", 52) + f"-{int(time.time())}"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"podium.dev/deep-check": dns_label(node)}},
        "spec": {
            "backoffLimit": 0,
            "ttlSecondsAfterFinished": 3600,
            "template": {
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "tolerations": [{"key": HEALTH_LABEL, "operator": "Exists"}],
                    "containers": [{"name": "deep-check", "image": image, "command": command}],
                }
            },
        },
    }  # fmt: skip


class NodeAgent:
    """One node's agent: its checks, its Node object and its saved fault."""

    def __init__(self, node: str, config: ClusterConfig, state_dir: Path) -> None:
        self.node, self.config = node, config
        self.api = KubeApi(config.kubernetes.kubeconfig, config.kubernetes.namespace)
        self.home = state_dir
        self.home.mkdir(parents=True, exist_ok=True)
        self.fault = SavedFault(self.home / "fault.json")
        self.deep_timeout_s = 600.0

    def checks(self, deep: bool) -> list[Result]:
        return run_node_checks(self.config, self.home, self.node, self.home / "health.jsonl", deep)

    def run_once(self) -> str:
        """One pass; what it did, in a word (healthy, fenced, waiting, recovered,
        deep-check-failed)."""
        bad = fencing_faults(self.checks(deep=False))
        if bad:
            self.fence(bad)
            return "fenced"
        return self.recover()

    def _node(self) -> Obj:
        found = self.api.get("Node", self.node)
        if found is None:
            raise ApiError(f"no node {self.node!r} in the cluster", 404)
        return found

    def fence(self, bad: list[Result]) -> None:
        """Label, taint and annotate the node; evict its pods where a GPU is lost."""
        node = self._node()
        annotations = node["metadata"].get("annotations") or {}
        ours = str(annotations.get(DRAIN_ANNOTATION, "")).startswith(PREFIX)
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != TAINT["key"]]
        patch: dict[str, Any] = {
            "metadata": {"labels": {HEALTH_LABEL: health_value(bad)}},
            "spec": {"taints": [*taints, TAINT]},
        }
        if not ours:
            patch["metadata"]["annotations"] = {DRAIN_ANNOTATION: fence_reason(bad)}
        self.api.merge_patch("Node", self.node, patch)
        strongest = max(bad, key=lambda r: list(Action).index(r.action)).action
        remedy = {Action.REBOOT: "reboot", Action.REPLACE: "replace"}.get(strongest, "reset")
        self.fault.record(remedy, bad)
        if any(r.action in EVICTING for r in bad):
            for pod in self.api.pods_on(self.node):
                if not pod["metadata"].get("deletionTimestamp"):
                    self.api.evict(pod["metadata"]["name"], pod["metadata"]["namespace"])

    def recover(self) -> str:
        """Bring back a node Podium took out, once its remedy is done and a deep check
        on it passes."""
        node = self._node()
        reason = str((node["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION, ""))
        if not reason.startswith(PREFIX):
            self.fault.clear()  # resumed by an administrator, if it was fenced
            return "healthy"
        if not self.fault.remedy_done(self.config.health):
            return "waiting"  # for the reboot, or for someone to replace the hardware
        passed, why = self.deep_check()
        if not passed:
            self.api.merge_patch(
                "Node", self.node, {"metadata": {"annotations": {
                    DRAIN_ANNOTATION: f"{PREFIX} deep check failed: {why}"[:200]}}},
            )  # fmt: skip
            return "deep-check-failed"
        taints = [t for t in node["spec"].get("taints") or [] if t.get("key") != TAINT["key"]]
        self.api.merge_patch(
            "Node", self.node, {
                "metadata": {"labels": {HEALTH_LABEL: "Schedulable"},
                             "annotations": {DRAIN_ANNOTATION: None}},
                "spec": {"taints": taints or None},
            },
        )  # fmt: skip
        self.fault.clear()
        return "recovered"

    def deep_check(self) -> tuple[bool, str]:
        """The deep check as a Job pinned to the node: (passed, why not)."""
        self._deep_label("InProgress")
        access = self.config.kubernetes
        image = access.image
        if not image:
            self._deep_label("Failed")
            return False, "no kubernetes.image to run the deep check in"
        job = deep_check_job(
            self.node, access.namespace, image, ["podium", "health", "--deep", "--json"]
        )
        self.api.create(job)
        name = job["metadata"]["name"]
        deadline = time.monotonic() + self.deep_timeout_s
        while time.monotonic() < deadline:
            found = self.api.get("Job", name)
            if condition(found, "Complete") is not None:
                self._deep_label("Passed")
                return True, ""
            if condition(found, "Failed") is not None:
                self._deep_label("Failed")
                return False, f"Job {name} failed"
            time.sleep(0.5)
        self._deep_label("Failed")
        return False, f"Job {name} did not end in {self.deep_timeout_s:.0f} s"

    def _deep_label(self, value: str) -> None:
        self.api.merge_patch("Node", self.node, {"metadata": {"labels": {DEEP_LABEL: value}}})


def run(agent: NodeAgent, interval_s: float, once: bool) -> int:
    """Pass after pass every `interval_s` (one with `once`); the exit status: 0, or 2
    when the last pass fenced the node."""
    while True:
        outcome = agent.run_once()
        if once:
            return 2 if outcome in ("fenced", "deep-check-failed") else 0
        time.sleep(interval_s)
